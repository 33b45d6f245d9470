#include "operator_session.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/open_store.hpp"
#include "tls_warning.hpp"

namespace idem::cli {

void add_operator_options(CLI::App& cmd, OperatorArgs& args) {
  cmd.add_option("--store", args.store, "Store URI: sqlite:PATH, rocksdb:PATH, redis://[user:password@]HOST:PORT, …")
      ->required();
  cmd.add_option("--at-ms", args.at_ms,
                 "Judge leases and expiry at this time, in ms since the Unix epoch (default: now, by the store's "
                 "clock when it has one); "
                 "e.g. the at_ms of a replayed trace")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--json", args.json, "Print JSON objects, one per line, instead of text");
}

OperatorSession::OperatorSession(std::string command, const OperatorArgs& args)
    : command_(std::move(command)),
      args_(args),
      now_(args.at_ms ? from_unix_ms(*args.at_ms) : TimePoint(std::chrono::system_clock::now())) {}

int OperatorSession::open() {
  warn_if_tls_insecure(command_, args_.store);
  auto store = open_store(args_.store);
  if (!store.ok()) return fail(store.status());
  store_ = std::move(store).value();
  if (args_.at_ms) return kExitOk;
  // A shared store's own time, which its consumers judge leases and expiry by.
  auto t = store_->server_time();
  if (t.ok()) now_ = *t;
  if (!t.ok() && t.status().code() != StatusCode::kUnimplemented) return fail(t.status());
  return kExitOk;
}

std::string OperatorSession::shown_uri() const { return redact_uri(args_.store); }

StatusOr<StoreAdmin*> OperatorSession::admin(std::string_view what) {
  if (StoreAdmin* a = store_->admin()) return a;
  return unimplemented(std::string(what) + ": not supported by this store");
}

StatusOr<EntityStore*> OperatorSession::entities(std::string_view what) {
  if (EntityStore* e = store_->entities()) return e;
  return unimplemented(std::string(what) + ": not supported by this store (it keeps no entity records)");
}

int OperatorSession::fail(int exit_code, std::string_view message) const {
  std::cerr << command_ << ": " << scrub_secrets(message, args_.store) << '\n';
  return exit_code;
}

int OperatorSession::fail(const Status& s) const {
  return fail(s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure, s.to_string());
}

std::string json_text(std::string_view bytes) {
  using Json = nlohmann::json;
  return Json(std::string(bytes)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string_view state_name(RecordState state) {
  switch (state) {
    case RecordState::kPending:
      return "pending";
    case RecordState::kInProgress:
      return "in_progress";
    case RecordState::kCompleted:
      return "done";
    case RecordState::kDeadLettered:
      return "dead_lettered";
  }
  return "unknown";
}

std::string iso_time(TimePoint t) {
  const std::int64_t ms = to_unix_ms(t);
  const std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms - static_cast<std::int64_t>(secs) * 1000));
  return buf;
}

namespace {

// "450 ms", "12.3 s", "5 min 3 s", "2 h 5 min", "6 d 23 h".
std::string human(Duration d) {
  const std::int64_t ms = d.count();
  constexpr std::int64_t kS = 1000, kMin = 60 * kS, kH = 60 * kMin, kD = 24 * kH;
  char buf[64];
  if (ms < kS)
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  else if (ms < kMin)
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / kS);
  else if (ms < kH)
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(ms / kMin),
                  static_cast<long long>(ms % kMin / kS));
  else if (ms < kD)
    std::snprintf(buf, sizeof buf, "%lld h %lld min", static_cast<long long>(ms / kH),
                  static_cast<long long>(ms % kH / kMin));
  else
    std::snprintf(buf, sizeof buf, "%lld d %lld h", static_cast<long long>(ms / kD),
                  static_cast<long long>(ms % kD / kH));
  return buf;
}

Duration until(TimePoint then, TimePoint now) {
  return std::chrono::duration_cast<Duration>(then > now ? then - now : TimePoint::duration{0});
}

std::string_view state_text(RecordState state) {
  switch (state) {
    case RecordState::kPending:
      return "pending (a retry count only; the next delivery is processed)";
    case RecordState::kInProgress:
      return "in progress";
    case RecordState::kCompleted:
      return "done";
    case RecordState::kDeadLettered:
      return "dead-lettered";
  }
  return "unknown";
}

void print_record_json(std::ostream& out, std::string_view id, const RecordInfo& r, TimePoint now) {
  out << R"({"type":"record","id":)" << json_text(id) << R"(,"status":")" << state_name(r.state) << '"';
  if (r.state == RecordState::kInProgress) {
    out << R"(,"owner":)" << json_text(r.owner) << R"(,"lease_until_ms":)" << to_unix_ms(r.lease_until)
        << R"(,"lease_left_ms":)" << until(r.lease_until, now).count();
  }
  out << R"(,"retries":)" << r.retries;
  if (r.fingerprint) out << R"(,"fingerprint":")" << std::hex << *r.fingerprint << std::dec << '"';
  if (r.result) out << R"(,"result":)" << json_text(*r.result);
  out << R"(,"expires_at_ms":)" << to_unix_ms(r.expires_at) << "}\n";
}

}  // namespace

void print_record(std::ostream& out, bool json, std::string_view id, const RecordInfo& r, TimePoint now) {
  if (json) return print_record_json(out, id, r, now);
  out << "id:          " << json_text(id) << '\n' << "status:      " << state_text(r.state) << '\n';
  if (r.state == RecordState::kInProgress)
    out << "lease:       held by " << json_text(r.owner) << " until " << iso_time(r.lease_until) << " ("
        << human(until(r.lease_until, now)) << " left)\n";
  out << "retries:     " << r.retries << '\n';
  if (r.fingerprint) out << "fingerprint: " << std::hex << *r.fingerprint << std::dec << '\n';
  if (r.result) out << "result:      " << json_text(*r.result) << '\n';
  out << "expires:     " << iso_time(r.expires_at) << " (in " << human(until(r.expires_at, now)) << ")\n";
}

void print_entity(std::ostream& out, bool json, std::string_view key, const EntityRecord& e,
                  const std::vector<BufferEntry>& buffered, TimePoint now) {
  if (json) {
    out << R"({"type":"entity","key":)" << json_text(key) << R"(,"revision":)" << e.revision << R"(,"version":)"
        << e.version;
    if (!e.state.empty()) out << R"(,"state":)" << json_text(e.state);
    out << "}\n";
    for (const BufferEntry& b : buffered)
      out << R"({"type":"buffered","version":)" << b.version << R"(,"id":)" << json_text(b.id)
          << R"(,"buffered_at_ms":)" << to_unix_ms(b.buffered_at) << R"(,"bytes":)" << b.bytes() << "}\n";
    return;
  }
  out << "key:             " << json_text(key) << '\n';
  if (e.revision == 0) {
    out << "entity record:   none\n";
  } else {
    out << "revision:        " << e.revision << '\n' << "applied version: " << e.version << '\n';
    out << "state:           " << (e.state.empty() ? std::string("(none)") : json_text(e.state)) << '\n';
  }
  out << "buffered:        " << buffered.size() << (buffered.size() == 1 ? " message" : " messages") << '\n';
  for (const BufferEntry& b : buffered)
    out << "  version " << b.version << "  id " << json_text(b.id) << "  buffered " << iso_time(b.buffered_at) << " ("
        << human(until(now, b.buffered_at)) << " ago)  " << b.bytes() << " bytes\n";
}

}  // namespace idem::cli
