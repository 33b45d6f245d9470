// `idem inspect --store URI [--id ID | --key KEY] [--json]`: one record's state, one
// entity's record and reorder buffer, or the store as a whole (docs/design.md §8).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "operator_session.hpp"

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "With --id: the record's status (pending, in_progress, done, dead_lettered), lease holder and time\n"
    "left, retry count, stored result and expiry. With --key: the entity's applied version, state and\n"
    "buffered versions. With neither: the records by status (if the store can count them) and the\n"
    "reorder buffer, then the outbox's unsent outgoing messages (up to --limit; with --id, that message's).\n"
    "sqlite: with leases=local keeps leases in the consumer's memory: none shows here.\n"
    "Exit status: 0 shown; 1 the store failed; 2 invalid options or store URI; 3 no such id or key.";

struct InspectArgs {
  OperatorArgs common;
  std::optional<std::string> id;
  std::optional<std::string> key;
  std::size_t limit = 100;
};

int print_outbox(OperatorSession& s, std::optional<std::string_view> incoming, std::size_t limit);

int inspect_id(OperatorSession& s, const std::string& id) {
  auto info = s.store().inspect(id, s.now());
  if (!info.ok()) return s.fail(info.status());
  if (!info->has_value())
    return s.fail(kExitNotFound, "no live record for id " + json_text(id) + " at " + iso_time(s.now()));
  print_record(std::cout, s.json(), id, **info, s.now());
  return print_outbox(s, id, 100);
}

int inspect_key(OperatorSession& s, const std::string& key, std::size_t limit) {
  auto entities = s.entities("reading an entity");
  if (!entities.ok()) return s.fail(entities.status());
  auto entity = (*entities)->read_entity(key);
  if (!entity.ok()) return s.fail(entity.status());
  auto buffered = (*entities)->buffer_read(key, limit);
  if (!buffered.ok()) return s.fail(buffered.status());
  if (entity->revision == 0 && buffered->empty())
    return s.fail(kExitNotFound, "key " + json_text(key) + " has no entity record and nothing buffered");
  print_entity(std::cout, s.json(), key, *entity, *buffered, s.now());
  return kExitOk;
}

// The records by status, or a line saying this store cannot count them.
int print_counts(OperatorSession& s) {
  auto admin = s.admin("counting records");
  auto counts = admin.ok() ? (*admin)->count_records(s.now()) : StatusOr<RecordCounts>(admin.status());
  const bool json = s.json();
  if (!counts.ok() && counts.status().code() != StatusCode::kUnimplemented) return s.fail(counts.status());
  if (!counts.ok()) {
    if (json)
      std::cout << R"({"type":"records","counted":false,"reason":)" << json_text(counts.status().message()) << "}\n";
    else
      std::cout << "records:  this store cannot count them (" << counts.status().message() << ")\n";
    return kExitOk;
  }
  const RecordCounts& c = *counts;
  if (json) {
    std::cout << R"({"type":"records","counted":true,"at_ms":)" << to_unix_ms(s.now()) << R"(,"pending":)" << c.pending
              << R"(,"in_progress":)" << c.in_progress << R"(,"done":)" << c.completed << R"(,"dead_lettered":)"
              << c.dead_lettered << R"(,"expired":)" << c.expired << "}\n";
    return kExitOk;
  }
  std::cout << "records:  " << c.completed << " done, " << c.dead_lettered << " dead-lettered, " << c.in_progress
            << " in progress, " << c.pending << " pending (retry count only) at " << iso_time(s.now()) << '\n'
            << "expired:  " << c.expired << " (not yet removed; idem purge --expired removes them)\n";
  return kExitOk;
}

// The reorder buffer's totals and its keys, oldest gap first.
int print_buffer(OperatorSession& s, std::size_t limit) {
  const bool json = s.json();
  if (s.store().entities() == nullptr) {
    if (json)
      std::cout << R"({"type":"buffer","kept":false})" << '\n';
    else
      std::cout << "buffer:   this store keeps no entity records or reorder buffer\n";
    return kExitOk;
  }
  auto summary = s.store().entities()->buffer_summary(limit);
  if (!summary.ok()) return s.fail(summary.status());
  if (json) {
    std::cout << R"({"type":"buffer","kept":true,"count":)" << summary->count << R"(,"bytes":)" << summary->bytes
              << "}\n";
  } else {
    std::cout << "buffer:   " << summary->count << (summary->count == 1 ? " message, " : " messages, ")
              << summary->bytes << " bytes\n";
  }
  for (const BufferedKey& k : summary->keys) {
    if (json)
      std::cout << R"({"type":"key","key":)" << json_text(k.key) << R"(,"count":)" << k.count << R"(,"lowest_version":)"
                << k.lowest_version << R"(,"oldest_at_ms":)" << to_unix_ms(k.oldest_at) << "}\n";
    else
      std::cout << "  key " << json_text(k.key) << ": " << k.count << " buffered from version " << k.lowest_version
                << ", oldest " << iso_time(k.oldest_at) << '\n';
  }
  return kExitOk;
}

// The outbox's unsent outgoing messages (all, or those of one incoming id), up to limit.
int print_outbox(OperatorSession& s, std::optional<std::string_view> incoming, std::size_t limit) {
  const bool json = s.json();
  if (s.store().outbox() == nullptr) {
    if (!incoming) {
      if (json)
        std::cout << R"({"type":"outbox","kept":false})" << '\n';
      else
        std::cout << "outbox:   this store keeps no outbox\n";
    }
    return kExitOk;
  }
  OutboxQuery q;
  q.incoming_id = incoming;
  q.max = limit + 1;
  auto pending = s.store().outbox()->outbox_pending(q);
  if (!pending.ok()) return s.fail(pending.status());
  if (incoming && pending->empty()) return kExitOk;  // a message with nothing unsent: no line
  const bool more = pending->size() > limit;
  if (more) pending->pop_back();
  if (json) {
    std::cout << R"({"type":"outbox","kept":true,"unsent":)" << pending->size() << R"(,"more":)"
              << (more ? "true" : "false") << "}\n";
  } else {
    std::cout << "outbox:   " << pending->size() << (more ? "+" : "") << " unsent outgoing "
              << (pending->size() == 1 && !more ? "message" : "messages") << '\n';
  }
  for (const OutboxEntry& e : *pending) {
    if (json)
      std::cout << R"({"type":"outgoing","id":)" << json_text(e.message.id) << R"(,"incoming_id":)"
                << json_text(e.incoming_id) << R"(,"position":)" << e.position << R"(,"to":)"
                << json_text(redact_uri(e.destination)) << R"(,"bytes":)" << e.message.body.size()
                << R"(,"created_at_ms":)" << to_unix_ms(e.created_at) << "}\n";
    else
      std::cout << "  " << json_text(e.message.id) << " to " << redact_uri(e.destination) << ", "
                << e.message.body.size() << " bytes, committed " << iso_time(e.created_at) << '\n';
  }
  return kExitOk;
}

int inspect_store(OperatorSession& s, std::size_t limit) {
  if (!s.json()) std::cout << "store:    " << s.shown_uri() << '\n';
  if (int rc = print_counts(s); rc != kExitOk) return rc;
  if (int rc = print_buffer(s, limit); rc != kExitOk) return rc;
  return print_outbox(s, std::nullopt, limit);
}

int run_inspect(const InspectArgs& a) {
  OperatorSession s("idem inspect", a.common);
  if ((a.id && a.id->empty()) || (a.key && a.key->empty()))
    return s.fail(kExitUsage, "--id and --key must not be empty");
  if (int rc = s.open(); rc != kExitOk) return rc;
  if (a.id) return inspect_id(s, *a.id);
  if (a.key) return inspect_key(s, *a.key, a.limit);
  return inspect_store(s, a.limit);
}

}  // namespace

void add_inspect_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("inspect", "Show a record, an entity, or a store's records and reorder buffer");
  cmd->footer(kFooter);
  auto a = std::make_shared<InspectArgs>();
  add_operator_options(*cmd, a->common);
  CLI::Option* id = cmd->add_option("--id", a->id, "Show the record of this message id");
  CLI::Option* key = cmd->add_option("--key", a->key, "Show this entity key's record and buffered messages");
  id->excludes(key);
  cmd->add_option("--limit", a->limit, "At most this many buffered messages or buffered keys")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_inspect(*a); }; });
}

}  // namespace idem::cli
