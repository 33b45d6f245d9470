// Records of the Redis store: claim, commit, release, extend, inspect, retries and
// batches, and the decoding of the record scripts' answers (script_codes.hpp).
#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "batch_pipelines.hpp"
#include "idem/backend/request_checks.hpp"
#include "record_codec.hpp"
#include "redis_store_impl.hpp"

namespace idem::redis::detail {
namespace {

std::string fp_arg(const std::optional<std::uint64_t>& fp) { return fp ? std::to_string(*fp) : std::string(); }

std::string now_arg(TimePoint t) { return std::to_string(to_unix_ms(t)); }

// r: the inspect script's kFound answer {1, s, o, l, e, n, f|nil, r|nil}. The same
// liveness rules as the scripts' live().
StatusOr<std::optional<RecordInfo>> decode_record(const Reply& r, std::int64_t now, const std::string& key) {
  const std::string& s = str_at(r, 1);
  const std::int64_t l = int_at(r, 3);
  const std::int64_t e = int_at(r, 4);
  std::int64_t n = int_at(r, 5);
  RecordInfo info;
  if (r.elements.size() > 6 && r.elements[6].type == Reply::Type::kString) {
    std::uint64_t v = 0;
    const std::string& fp = r.elements[6].str;
    if (std::from_chars(fp.data(), fp.data() + fp.size(), v).ec == std::errc{}) info.fingerprint = v;
  }
  if (r.elements.size() > 7 && r.elements[7].type == Reply::Type::kString) info.result = r.elements[7].str;
  if (s == "c" || s == "x") {
    if (e <= now) return std::optional<RecordInfo>();
    info.state = s == "c" ? RecordState::kCompleted : RecordState::kDeadLettered;
    info.expires_at = from_unix_ms(e);
    return std::optional<RecordInfo>(std::move(info));
  }
  if (s != "i" && s != "p")
    return data_loss("redis: key \"" + printable(key) + "\": unknown record state \"" + printable(s) + "\"");
  if (!(n > 0 && e > now)) n = 0;
  const bool leased = s == "i" && l > now;
  if (!leased && n == 0) return std::optional<RecordInfo>();
  info.retries = static_cast<std::uint32_t>(n);
  info.expires_at = from_unix_ms(e);
  if (leased) {
    info.state = RecordState::kInProgress;
    info.owner = str_at(r, 2);
    info.lease_until = from_unix_ms(l);
  } else {
    info.state = RecordState::kPending;
  }
  return std::optional<RecordInfo>(std::move(info));
}

}  // namespace

std::string printable(std::string_view bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < 96; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (bytes.size() > 96) out += "...";
  return out;
}

Reply commit_many_answer(const Reply& r, std::size_t k, std::size_t& detail) {
  const char code = r.elements[0].str[k];
  Reply one;
  one.type = Reply::Type::kArray;
  one.replicas_acked = r.replicas_acked;  // the WAIT after the batch script
  Reply c;
  c.type = Reply::Type::kInteger;
  const std::int64_t digit = code - '0';
  const bool known = digit == static_cast<std::int64_t>(CommitCode::kCommitted) ||
                     digit == static_cast<std::int64_t>(CommitCode::kAlreadyCompleted) ||
                     digit == static_cast<std::int64_t>(CommitCode::kLeasedByOther);
  c.integer = known ? digit : kScriptError;  // kCommitManyError, or a character no script sends
  one.elements.push_back(std::move(c));
  const bool has_detail = !known || digit == static_cast<std::int64_t>(CommitCode::kLeasedByOther);
  if (has_detail) one.elements.push_back(detail < r.elements.size() ? r.elements[detail++] : Reply{});
  return one;
}

// The Status for an error reply (or a {-1, message} script answer) at `key`.
Status error_status(std::string_view msg, const std::string& key) {
  const std::string where = "redis: key \"" + printable(key) + "\": ";
  auto starts = [&](std::string_view p) { return msg.substr(0, p.size()) == p; };
  if (starts("WRONGTYPE"))
    return data_loss(where + "holds a value of the wrong type (not an idem record): " + std::string(msg));
  if (starts("IDEMCORRUPT")) return data_loss(where + std::string(msg.substr(std::min<std::size_t>(12, msg.size()))));
  if (starts("LOADING") || starts("BUSY") || starts("MASTERDOWN") || starts("READONLY") || starts("CLUSTERDOWN") ||
      starts("TRYAGAIN") || starts("MOVED") || starts("ASK") || starts("NOREPLICAS"))
    return unavailable(where + std::string(msg));
  if (starts("OOM")) return resource_exhausted(where + std::string(msg));
  if (starts("NOAUTH") || starts("WRONGPASS") || starts("NOPERM"))
    return failed_precondition(where + "not allowed: " + std::string(msg));
  return internal_error(where + "script or command failed: " + std::string(msg));
}

// The array a script answered, or the Status of whatever else came back.
StatusOr<const Reply*> script_answer(const Reply& r, const std::string& key) {
  if (r.is_error()) return error_status(r.str, key);
  if (r.type != Reply::Type::kArray || r.elements.empty() || r.elements[0].type != Reply::Type::kInteger)
    return internal_error("redis: key \"" + printable(key) + "\": unexpected script answer");
  if (r.elements[0].integer == kScriptError)
    return error_status(r.elements.size() > 1 ? std::string_view(r.elements[1].str) : "", key);
  return &r;
}
StatusOr<const Reply*> script_answer(const StatusOr<Reply>& r, const std::string& key) {
  if (!r.ok()) return r.status();
  return script_answer(*r, key);
}

const std::string& str_at(const Reply& a, std::size_t i) {
  static const std::string empty;
  return i < a.elements.size() ? a.elements[i].str : empty;
}
std::int64_t int_at(const Reply& a, std::size_t i) { return i < a.elements.size() ? a.elements[i].integer : 0; }

StatusOr<ClaimResult> decode_claim(const Reply& a, const std::string& key) {
  ClaimResult c;
  switch (static_cast<ClaimCode>(int_at(a, 0))) {
    case ClaimCode::kGranted:
      c.retries = static_cast<std::uint32_t>(int_at(a, 1));
      return c;
    case ClaimCode::kCompleted:
      c.status = ClaimStatus::kCompleted;
      c.dead_lettered = int_at(a, 1) == 1;
      if (int_at(a, 2) == 1) c.result = str_at(a, 3);
      return c;
    case ClaimCode::kLeased:
      c.status = ClaimStatus::kInProgress;
      c.owner = str_at(a, 1);
      c.lease_left = Duration(int_at(a, 2));
      return c;
    case ClaimCode::kConflict:
      return ClaimResult::conflict();
  }
  return internal_error("redis: key \"" + printable(key) + "\": unknown claim answer");
}

Status decode_commit(const Reply& a, const Options& o, const std::string& key) {
  switch (static_cast<CommitCode>(int_at(a, 0))) {
    case CommitCode::kCommitted:
      if (o.wait_replicas > 0 && a.replicas_acked < o.wait_replicas)
        return unavailable("redis: commit of key \"" + printable(key) + "\" landed on the master but " +
                           std::to_string(std::max(a.replicas_acked, 0)) + " of " + std::to_string(o.wait_replicas) +
                           " replicas acknowledged it within " + std::to_string(o.wait_timeout.count()) + " ms");
      return ok_status();
    case CommitCode::kAlreadyCompleted:
      return failed_precondition("id is already completed");
    case CommitCode::kLeasedByOther:
      return failed_precondition("lease is held by " + printable(str_at(a, 1)));
    case CommitCode::kRevisionMismatch:
      return aborted("the entity record's revision changed; nothing was written");
  }
  return internal_error("redis: key \"" + printable(key) + "\": unknown commit answer");
}

// True: the lease was granted (the key was absent); false: the key exists.
StatusOr<bool> fresh_claim_answer(const StatusOr<Reply>& r, const std::string& key) {
  if (!r.ok()) return r.status();
  if (r->is_error()) return error_status(r->str, key);
  return r->type == Reply::Type::kStatus;
}

StoreCapabilities RedisStoreImpl::capabilities() const {
  StoreCapabilities c;
  c.durable = true;  // survives consumer crashes; server crashes: see docs/stores.md
  c.shared = true;
  c.native_ttl = true;
  c.combined_commit_claim = true;
  return c;
}

std::string RedisStoreImpl::key_of(std::string_view id) const {
  std::string k;
  k.reserve(o_.prefix.size() + id.size() + 2);
  k += o_.prefix;
  k += '{';
  k += id;
  k += '}';
  return k;
}

StatusOr<std::string> RedisStoreImpl::record_key(std::string_view id, std::string_view entity_key) const {
  if (entity_key.empty()) return invalid_argument("redis: record_key: empty entity key");
  return key_of(id, entity_key);
}

std::string RedisStoreImpl::key_of(std::string_view id, std::string_view entity_key) const {
  return o_.cluster ? entity_id_key(o_.prefix, entity_key, id) : key_of(id);
}

// The record key of an id: on a cluster in the entity's slot when claimed with an
// entity key (so that one script reaches both); on a standalone server always
// key_of(id), which every script can reach.
std::string RedisStoreImpl::id_key(std::string_view id, const std::optional<std::string_view>& entity_key) const {
  return entity_key ? key_of(id, *entity_key) : key_of(id);
}

// A plain SET NX PX first (no script): granted iff the key was absent. Only if the
// key exists, the claim script decides, in a second round trip.
StatusOr<ClaimResult> RedisStoreImpl::claim(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  if (q.entity_key) {
    std::vector<StatusOr<ClaimResult>> out(1, StatusOr<ClaimResult>(unavailable("not run")));
    const std::size_t at = 0;
    claim_entities(std::span<const ClaimRequest>(&q, 1), std::span<const std::size_t>(&at, 1), out);
    return std::move(out[0]);
  }
  const Command set = fresh_claim_cmd(q);
  auto granted = fresh_claim_answer(run_one(set, 0), set.keys[0]);
  if (!granted.ok()) return granted.status();
  if (*granted) return ClaimResult::granted(0);
  Command cmd = claim_cmd(q);
  auto r = run_one(cmd, 0);
  auto a = script_answer(r, cmd.keys[0]);
  if (!a.ok()) return a.status();
  return decode_claim(**a, cmd.keys[0]);
}

Status RedisStoreImpl::commit(const CommitRequest& q) {
  if (Status s = check_commit(q); !s.ok()) return s;
  if (q.entity) {
    std::vector<Status> out(1, unavailable("not run"));
    const std::size_t at = 0;
    commit_entities(std::span<const CommitRequest>(&q, 1), std::span<const std::size_t>(&at, 1), out);
    return out[0];
  }
  Command cmd = commit_cmd(q);
  auto r = run_one(cmd, o_.wait_replicas);
  auto a = script_answer(r, cmd.keys[0]);
  if (!a.ok()) return a.status();
  return decode_commit(**a, o_, cmd.keys[0]);
}

StatusOr<std::uint32_t> RedisStoreImpl::release(const ReleaseRequest& q) {
  if (Status s = check_release(q); !s.ok()) return s;
  Command cmd{&release_,
              {id_key(q.id, q.entity_key)},
              {now_arg(q.now), std::string(q.owner), q.count_retry ? "1" : "0",
               std::to_string(std::max<std::int64_t>(q.retry_ttl.count(), 1)), slack()}};
  auto r = run_one(cmd, 0);
  auto a = script_answer(r, cmd.keys[0]);
  if (!a.ok()) return a.status();
  return static_cast<std::uint32_t>(int_at(**a, 1));
}

Status RedisStoreImpl::extend(const ExtendRequest& q) {
  if (Status s = check_extend(q); !s.ok()) return s;
  Command cmd{&extend_,
              {id_key(q.id, q.entity_key)},
              {now_arg(q.now), std::string(q.owner), std::to_string(q.lease.count()), slack()}};
  auto r = run_one(cmd, 0);
  auto a = script_answer(r, cmd.keys[0]);
  if (!a.ok()) return a.status();
  switch (static_cast<ExtendCode>(int_at(**a, 0))) {
    case ExtendCode::kExtended:
      return ok_status();
    case ExtendCode::kNotHeld:
      return failed_precondition("the lease is not held by this owner");
    case ExtendCode::kExpired:
      return failed_precondition("the lease expired");
  }
  return internal_error("redis: unknown extend answer");
}

StatusOr<std::optional<RecordInfo>> RedisStoreImpl::inspect(std::string_view id, TimePoint now) {
  if (id.empty()) return invalid_argument("inspect: empty id");
  return inspect_key(key_of(id), now);
}

StatusOr<std::optional<RecordInfo>> RedisStoreImpl::inspect_with_entity(std::string_view id,
                                                                        std::string_view entity_key, TimePoint now) {
  if (id.empty()) return invalid_argument("inspect: empty id");
  if (entity_key.empty()) return invalid_argument("inspect: empty entity key");
  return inspect_key(key_of(id, entity_key), now);
}

StatusOr<std::optional<RecordInfo>> RedisStoreImpl::inspect_key(const std::string& key, TimePoint now) {
  Command cmd{&inspect_, {key}, {}};
  auto reply = run_one(cmd, 0);
  auto a = script_answer(reply, key);
  if (!a.ok()) return a.status();
  const Reply& r = **a;
  if (static_cast<InspectCode>(int_at(r, 0)) == InspectCode::kAbsent) return std::optional<RecordInfo>();
  if (r.elements.size() < 6) return internal_error("redis: unexpected inspect answer");
  return decode_record(r, to_unix_ms(now), key);
}

// Round trip 1: a plain SET NX PX per fresh-looking id (no script: what the claim
// script would write for an absent key). Round trip 2, only for ids whose key
// exists: the claim script, which answers as claim() does.
// Requests with an entity key go to claim_entities (in one more round trip).
std::vector<StatusOr<ClaimResult>> RedisStoreImpl::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<std::size_t> with, without;
  for (std::size_t i = 0; i < requests.size(); ++i) (requests[i].entity_key ? with : without).push_back(i);
  if (with.empty()) return claim_batch_plain(requests);
  std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(unavailable("not run")));
  claim_entities(requests, with, out);
  if (!without.empty()) {
    std::vector<ClaimRequest> plain;
    for (std::size_t i : without) plain.push_back(requests[i]);
    auto answers = claim_batch_plain(plain);
    for (std::size_t k = 0; k < without.size(); ++k) out[without[k]] = std::move(answers[k]);
  }
  return out;
}

// Round trip 1: SET NX PX per valid request, except the repeats of an id, which go
// to the claim script with the ids whose key exists (round trip 2, in request order).
std::vector<StatusOr<ClaimResult>> RedisStoreImpl::claim_batch_plain(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(ClaimResult{}));
  std::vector<std::size_t> where;
  where.reserve(requests.size());
  // Repeated ids are rare: the set that finds them is built only if there are any.
  bool repeats = false;
  {
    std::vector<std::string_view> ids;
    ids.reserve(requests.size());
    for (const ClaimRequest& q : requests) ids.push_back(q.id);
    std::sort(ids.begin(), ids.end());
    repeats = std::adjacent_find(ids.begin(), ids.end()) != ids.end();
  }
  std::unordered_set<std::string_view> seen;
  std::vector<std::size_t> scripted;  // repeated ids go to the script, in order
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ClaimRequest& q = requests[i];
    if (Status s = check_claim(q); !s.ok()) {
      out[i] = s;
    } else if (repeats && !seen.insert(q.id).second) {
      scripted.push_back(i);
    } else {
      where.push_back(i);
    }
  }
  FreshClaims fresh(*this, o_, requests, where, out, scripted);
  if (!where.empty()) ex_->run_encoded(fresh);
  if (scripted.empty()) return out;
  std::sort(scripted.begin(), scripted.end());
  std::vector<Command> cmds;
  cmds.reserve(scripted.size());
  for (std::size_t i : scripted) cmds.push_back(claim_cmd(requests[i]));
  for_each_answer(cmds, claim_many_, 4, 0, [&](std::size_t k, StatusOr<const Reply*> a) {
    out[scripted[k]] = a.ok() ? decode_claim(**a, cmds[k].keys[0]) : StatusOr<ClaimResult>(a.status());
  });
  return out;
}

// Requests with an entity write go to commit_entities (in one more round trip).
std::vector<Status> RedisStoreImpl::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<std::size_t> with, without;
  for (std::size_t i = 0; i < requests.size(); ++i) (requests[i].entity ? with : without).push_back(i);
  if (with.empty()) return commit_batch_plain(requests);
  std::vector<Status> out(requests.size(), unavailable("not run"));
  commit_entities(requests, with, out);
  if (!without.empty()) {
    std::vector<CommitRequest> plain;
    for (std::size_t i : without) plain.push_back(requests[i]);
    auto answers = commit_batch_plain(plain);
    for (std::size_t k = 0; k < without.size(); ++k) out[without[k]] = std::move(answers[k]);
  }
  return out;
}

// One round trip (per node, the nodes in parallel): commit_many scripts of up to
// kKeysPerScript commits that share owner, now, ttl and, on a cluster, a key slot
// (those arguments sent once), answering one byte per commit: encoded in place
// (CommitMany) unless a WAIT follows.
std::vector<Status> RedisStoreImpl::commit_batch_plain(std::span<const CommitRequest> requests) {
  std::vector<Status> out(requests.size());
  std::vector<std::size_t> where;
  where.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (Status s = check_commit(requests[i]); !s.ok()) {
      out[i] = s;
    } else {
      where.push_back(i);
    }
  }
  // On a cluster a commit of an id claimed with an entity key lives in the entity's
  // slot (id_key), which CommitMany does not write: those take the Command path.
  const bool plain_keys = !o_.cluster || std::none_of(where.begin(), where.end(), [&](std::size_t i) {
    return requests[i].entity_key.has_value();
  });
  if (where.size() >= 2 && o_.wait_replicas <= 0 && plain_keys) {
    CommitMany many(*this, o_, commit_many_, requests, where, out, kKeysPerScript, o_.cluster);
    ex_->run_encoded(many);
    return out;
  }
  std::vector<Command> cmds;
  cmds.reserve(where.size());
  for (std::size_t i : where) cmds.push_back(commit_cmd(requests[i]));
  if (o_.cluster || cmds.size() < 2) {
    auto replies = ex_->run(cmds, o_.wait_replicas, o_.wait_timeout);
    for (std::size_t k = 0; k < cmds.size(); ++k) {
      auto a = script_answer(replies[k], cmds[k].keys[0]);
      out[where[k]] = a.ok() ? decode_commit(**a, o_, cmds[k].keys[0]) : a.status();
    }
    return out;
  }
  commit_many(cmds, where, out);
  return out;
}

void RedisStoreImpl::commit_many(std::vector<Command>& cmds, const std::vector<std::size_t>& where,
                                 std::vector<Status>& out) {
  // commit_cmd args: now, owner, value, prefix, px, slack.
  std::vector<Command> scripts;
  std::vector<std::vector<std::size_t>> members;  // indexes into cmds, per script
  for (std::size_t k = 0; k < cmds.size(); ++k) {
    Command& c = cmds[k];
    bool fits = !scripts.empty() && members.back().size() < kKeysPerScript;
    if (fits) {
      const Command& first = cmds[members.back().front()];
      fits = first.args[0] == c.args[0] && first.args[1] == c.args[1] && first.args[4] == c.args[4];
    }
    if (!fits) {
      scripts.push_back(Command{&commit_many_, {}, {c.args[5], c.args[0], c.args[1], c.args[3], c.args[4]}});
      members.emplace_back();
    }
    scripts.back().keys.push_back(std::move(c.keys[0]));
    scripts.back().args.push_back(std::move(c.args[2]));
    members.back().push_back(k);
  }
  auto replies = ex_->run(scripts, o_.wait_replicas, o_.wait_timeout);
  for (std::size_t s = 0; s < scripts.size(); ++s) {
    const StatusOr<Reply>& r = replies[s];
    const std::vector<std::size_t>& idx = members[s];
    const bool shaped =
        r.ok() && r->type == Reply::Type::kArray && !r->elements.empty() && r->elements[0].str.size() == idx.size();
    std::size_t detail = 1;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const std::string& key = scripts[s].keys[k];
      Status& st = out[where[idx[k]]];
      if (!r.ok()) {
        st = r.status();
      } else if (r->is_error()) {
        st = error_status(r->str, key);
      } else if (!shaped) {
        st = internal_error("redis: unexpected batch answer");
      } else if (r->elements[0].str[k] == '0' && (o_.wait_replicas <= 0 || r->replicas_acked >= o_.wait_replicas)) {
        st = ok_status();  // kCommitted, as decode_commit answers it, without building its Reply
      } else {
        Reply one = commit_many_answer(*r, k, detail);
        auto a = script_answer(one, key);
        st = a.ok() ? decode_commit(**a, o_, key) : a.status();
      }
    }
  }
}

// One round trip: the commit script and a plain SET NX PX for the claim, pipelined
// (in this order on one connection when both keys are on one node). Only if the
// claimed id's key exists, a second round trip runs the claim script.
CommitThenClaimResult RedisStoreImpl::commit_then_claim(const CommitRequest& c, const ClaimRequest& q) {
  if (c.entity || c.entity_key || q.entity_key) {
    Status committed = commit(c);
    return {std::move(committed), claim(q)};
  }
  if (Status s = check_commit(c); !s.ok()) return {s, claim(q)};
  if (Status s = check_claim(q); !s.ok()) return {commit(c), s};
  const std::vector<Command> cmds = {commit_cmd(c), fresh_claim_cmd(q)};
  auto replies = ex_->run(cmds, o_.wait_replicas, o_.wait_timeout);
  auto ca = script_answer(replies[0], cmds[0].keys[0]);
  CommitThenClaimResult out{ca.ok() ? decode_commit(**ca, o_, cmds[0].keys[0]) : ca.status(), unavailable("not run")};
  auto granted = fresh_claim_answer(replies[1], cmds[1].keys[0]);
  if (granted.ok() && !*granted) {
    Command cmd = claim_cmd(q);  // the key exists: the script decides
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, cmd.keys[0]);
    out.claim = a.ok() ? decode_claim(**a, cmd.keys[0]) : StatusOr<ClaimResult>(a.status());
  } else if (granted.ok()) {
    out.claim = ClaimResult::granted(0);
  } else {
    out.claim = granted.status();
  }
  return out;
}

StatusOr<std::size_t> RedisStoreImpl::purge_expired(TimePoint, std::size_t) { return std::size_t{0}; }

StatusOr<TimePoint> RedisStoreImpl::server_time() {
  Command time;
  time.keys = {totals_key_};  // routes it; TIME itself reads no key
  time.args = {"TIME"};
  auto r = run_one(time, 0);
  if (!r.ok()) return r.status();
  std::int64_t part[2] = {-1, -1};  // seconds, microseconds
  for (std::size_t i = 0; r->type == Reply::Type::kArray && r->elements.size() == 2 && i < 2; ++i) {
    const std::string& t = r->elements[i].str;
    if (std::from_chars(t.data(), t.data() + t.size(), part[i]).ptr != t.data() + t.size()) part[i] = -1;
  }
  if (part[0] < 0 || part[1] < 0) return unavailable("redis: TIME answered something else: " + printable(r->str));
  return TimePoint(std::chrono::seconds(part[0]) + std::chrono::microseconds(part[1]));
}

Command RedisStoreImpl::claim_cmd(const ClaimRequest& q) const {
  return Command{&claim_,
                 {id_key(q.id, q.entity_key)},
                 {now_arg(q.now), std::string(q.owner), std::to_string(std::max<std::int64_t>(q.lease.count(), 1)),
                  fp_arg(q.fingerprint), slack()}};
}

// SET NX PX of the value the claim script writes for an absent key.
Command RedisStoreImpl::fresh_claim_cmd(const ClaimRequest& q) const {
  const std::int64_t lease = std::max<std::int64_t>(q.lease.count(), 1);
  std::string key = id_key(q.id, q.entity_key);
  return Command{nullptr,
                 {key},
                 {"SET", key, encode_fresh_lease(q.owner, to_unix_ms(q.now) + lease, q.fingerprint), "NX", "PX",
                  std::to_string(lease + o_.expiry_slack.count())}};
}

Command RedisStoreImpl::commit_cmd(const CommitRequest& q) const {
  const std::int64_t ttl = std::max<std::int64_t>(q.ttl.count(), 1);
  return Command{
      &commit_,
      {q.entity ? key_of(q.id, q.entity->key) : id_key(q.id, q.entity_key)},
      {now_arg(q.now), std::string(q.owner),
       encode_done(q.outcome == Outcome::kDeadLettered ? 'x' : 'c', to_unix_ms(q.now) + ttl, q.fingerprint, q.result),
       lease_prefix(q.owner), std::to_string(ttl + o_.expiry_slack.count()), slack()}};
}

// Runs single-key script commands (whose last argument is the slack) in one round
// trip and calls f(k, answer of cmds[k]) for each. On a standalone server they are
// merged into `many` scripts of up to kKeysPerScript keys each (per_key arguments per
// key, without the slack); on a cluster each is sent as it is.
template <class F>
void RedisStoreImpl::for_each_answer(const std::vector<Command>& cmds, const Script& many, std::size_t per_key,
                                     int wait, F&& f) {
  if (o_.cluster || cmds.size() < 2) {
    auto replies = ex_->run(cmds, wait, o_.wait_timeout);
    for (std::size_t k = 0; k < cmds.size(); ++k) f(k, script_answer(replies[k], cmds[k].keys[0]));
    return;
  }
  std::vector<Command> merged;
  for (std::size_t i = 0; i < cmds.size(); i += kKeysPerScript) {
    Command m{&many, {}, {slack()}};
    const std::size_t end = std::min(cmds.size(), i + kKeysPerScript);
    m.keys.reserve(end - i);
    m.args.reserve(1 + (end - i) * per_key);
    for (std::size_t k = i; k < end; ++k) {
      m.keys.push_back(cmds[k].keys[0]);
      m.args.insert(m.args.end(), cmds[k].args.begin(), cmds[k].args.begin() + static_cast<std::ptrdiff_t>(per_key));
    }
    merged.push_back(std::move(m));
  }
  auto replies = ex_->run(merged, wait, o_.wait_timeout);
  for (std::size_t c = 0; c < merged.size(); ++c) {
    const std::size_t first = c * kKeysPerScript;
    const std::size_t n = merged[c].keys.size();
    const StatusOr<Reply>& r = replies[c];
    const bool shaped = r.ok() && r->type == Reply::Type::kArray && r->elements.size() == n;
    for (std::size_t k = 0; k < n; ++k) {
      const std::string& key = cmds[first + k].keys[0];
      if (!r.ok()) {
        f(first + k, StatusOr<const Reply*>(r.status()));
      } else if (r->is_error()) {
        f(first + k, StatusOr<const Reply*>(error_status(r->str, key)));
      } else if (!shaped) {
        f(first + k, StatusOr<const Reply*>(internal_error("redis: unexpected batch answer")));
      } else {
        Reply one = r->elements[k];
        one.replicas_acked = r->replicas_acked;  // the WAIT after the batch script
        f(first + k, script_answer(one, key));
      }
    }
  }
}

StatusOr<Reply> RedisStoreImpl::run_one(const Command& cmd, int wait_replicas) {
  auto out = ex_->run(std::span<const Command>(&cmd, 1), wait_replicas, o_.wait_timeout);
  return std::move(out.front());
}

}  // namespace idem::redis::detail

