// What `idem inspect` and `idem purge` share: the store they open, the time they
// judge leases and expiry at, how they report a failure, and how they print a record
// or an entity (as text, or as JSON lines with --json).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "idem/store.hpp"

namespace CLI {
class App;
}

namespace idem::cli {

// The options every operator command takes.
struct OperatorArgs {
  std::string store;                  // --store URI (required)
  std::optional<std::int64_t> at_ms;  // --at-ms; default: the store's time, else the host's
  bool json = false;                  // --json: JSON lines instead of text
};

// Adds --store, --at-ms and --json to cmd.
void add_operator_options(CLI::App& cmd, OperatorArgs& args);

// One run of an operator command over one store. Not thread-safe.
class OperatorSession {
 public:
  // `command` names the command in messages, e.g. "idem inspect".
  OperatorSession(std::string command, const OperatorArgs& args);

  // Opens the store and, without --at-ms, reads its time (Store::server_time(); the
  // host's clock for a store without one). Returns kExitOk, or prints why not and
  // returns kExitUsage (a bad URI) or kExitFailure (a store that cannot be opened or
  // read).
  int open();

  Store& store() { return *store_; }
  // The store's operator calls and its entities, or kUnimplemented naming `what` ("…:
  // not supported by this store") when it has none.
  StatusOr<StoreAdmin*> admin(std::string_view what);
  StatusOr<EntityStore*> entities(std::string_view what);
  TimePoint now() const { return now_; }
  bool json() const { return args_.json; }
  // The store URI with its password hidden.
  std::string shown_uri() const;

  // Prints "<command>: <message>" to stderr, the store URI's password removed, and
  // returns `exit_code`.
  int fail(int exit_code, std::string_view message) const;
  // As above for a store error: kInvalidArgument → kExitUsage, else kExitFailure.
  int fail(const Status& s) const;

 private:
  std::string command_;
  OperatorArgs args_;
  TimePoint now_;
  std::shared_ptr<Store> store_;
};

// Bytes as a JSON string: valid UTF-8 as is, anything else replaced (U+FFFD).
std::string json_text(std::string_view bytes);

// The names of a record's state: "pending", "in_progress", "done", "dead_lettered".
std::string_view state_name(RecordState state);

// Prints one record as inspect() returned it at `now`.
void print_record(std::ostream& out, bool json, std::string_view id, const RecordInfo& r, TimePoint now);

// Prints a key's entity record and (up to the caller's limit) its buffered entries.
void print_entity(std::ostream& out, bool json, std::string_view key, const EntityRecord& e,
                  const std::vector<BufferEntry>& buffered, TimePoint now);

// "2026-12-01T14:03:04.005Z".
std::string iso_time(TimePoint t);

}  // namespace idem::cli
