// The Store contract on Redis: request → script command → decoded answer.
#include "idem/redis_store.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "cluster/cluster_executor.hpp"
#include "entity_layout.hpp"
#include "executor.hpp"
#include "idem/request_checks.hpp"
#include "record_codec.hpp"
#include "scripts.hpp"

namespace idem::redis {
namespace detail {
namespace {

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

std::string fp_arg(const std::optional<std::uint64_t>& fp) { return fp ? std::to_string(*fp) : std::string(); }

// The Status for an error reply (or a {-1, message} script answer) at `key`.
Status error_status(std::string_view msg, const std::string& key) {
  const std::string where = "redis: key \"" + printable(key) + "\": ";
  auto starts = [&](std::string_view p) { return msg.substr(0, p.size()) == p; };
  if (starts("WRONGTYPE")) return data_loss(where + "holds a value of the wrong type (not an idem record): " + std::string(msg));
  if (starts("IDEMCORRUPT")) return data_loss(where + std::string(msg.substr(12)));
  if (starts("LOADING") || starts("BUSY") || starts("MASTERDOWN") || starts("READONLY") || starts("CLUSTERDOWN") ||
      starts("TRYAGAIN") || starts("MOVED") || starts("ASK") || starts("NOREPLICAS"))
    return unavailable(where + std::string(msg));
  if (starts("OOM")) return resource_exhausted(where + std::string(msg));
  if (starts("NOAUTH") || starts("WRONGPASS") || starts("NOPERM"))
    return invalid_argument(where + "not allowed: " + std::string(msg));
  return internal_error(where + "script or command failed: " + std::string(msg));
}

// The array a script answered, or the Status of whatever else came back.
StatusOr<const Reply*> script_answer(const Reply& r, const std::string& key) {
  if (r.is_error()) return error_status(r.str, key);
  if (r.type != Reply::Type::kArray || r.elements.empty() || r.elements[0].type != Reply::Type::kInteger)
    return internal_error("redis: key \"" + printable(key) + "\": unexpected script answer");
  if (r.elements[0].integer == -1)
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
  switch (int_at(a, 0)) {
    case 0:
      c.retries = static_cast<std::uint32_t>(int_at(a, 1));
      return c;
    case 1:
      c.status = ClaimStatus::kCompleted;
      c.dead_lettered = int_at(a, 1) == 1;
      if (int_at(a, 2) == 1) c.result = str_at(a, 3);
      return c;
    case 2:
      c.status = ClaimStatus::kInProgress;
      c.owner = str_at(a, 1);
      c.lease_left = Duration(int_at(a, 2));
      return c;
    case 3: return ClaimResult::conflict();
    default: return internal_error("redis: key \"" + printable(key) + "\": unknown claim answer");
  }
}

Status decode_commit(const Reply& a, const Options& o, const std::string& key) {
  switch (int_at(a, 0)) {
    case 0:
      if (o.wait_replicas > 0 && a.replicas_acked < o.wait_replicas)
        return unavailable("redis: commit of key \"" + printable(key) + "\" landed on the master but " +
                           std::to_string(std::max(a.replicas_acked, 0)) + " of " + std::to_string(o.wait_replicas) +
                           " replicas acknowledged it within " + std::to_string(o.wait_timeout.count()) + " ms");
      return ok_status();
    case 1: return failed_precondition("id is already completed");
    case 2: return failed_precondition("lease is held by " + printable(str_at(a, 1)));
    case 4: return aborted("the entity record's revision changed; nothing was written");
    default: return internal_error("redis: key \"" + printable(key) + "\": unknown commit answer");
  }
}

class RedisStoreImpl final : public RedisStore {
 public:
  RedisStoreImpl(Options o, std::unique_ptr<Executor> ex) : o_(std::move(o)), ex_(std::move(ex)) {}

  // Loads the scripts (SCRIPT LOAD) so that calls send EVALSHA.
  Status load_scripts() {
    for (Script* s : {&claim_, &commit_, &release_, &extend_, &inspect_, &claim_many_, &commit_many_, &claim_entity_,
                      &commit_entity_, &write_entity_, &buffer_put_, &buffer_read_, &buffer_remove_,
                      &buffer_key_info_, &buffer_account_}) {
      auto r = ex_->run_anywhere({"SCRIPT", "LOAD", s->body});
      if (!r.ok()) return r.status();
      if (r->is_error()) return error_status(r->str, "(SCRIPT LOAD)");
      s->sha = r->str;
    }
    return ok_status();
  }

  StoreCapabilities capabilities() const override {
    StoreCapabilities c;
    c.durable = true;  // survives consumer crashes; server crashes: see docs/stores.md
    c.shared = true;
    c.native_ttl = true;
    c.entities = true;
    c.combined_commit_claim = true;
    return c;
  }

  std::string key_of(std::string_view id) const override {
    std::string k;
    k.reserve(o_.prefix.size() + id.size() + 2);
    k += o_.prefix;
    k += '{';
    k += id;
    k += '}';
    return k;
  }

  // A plain SET NX PX first (no script): granted iff the key was absent. Only if the
  // key exists, the claim script decides, in a second round trip.
  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
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

  Status commit(const CommitRequest& q) override {
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

  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override {
    if (Status s = check_release(q); !s.ok()) return s;
    Command cmd{&release_, {id_key(q.id, q.entity_key)},
                {now_arg(q.now), std::string(q.owner), q.count_retry ? "1" : "0",
                 std::to_string(std::max<std::int64_t>(q.retry_ttl.count(), 1)), slack()}};
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, cmd.keys[0]);
    if (!a.ok()) return a.status();
    return static_cast<std::uint32_t>(int_at(**a, 1));
  }

  Status extend(const ExtendRequest& q) override {
    if (Status s = check_extend(q); !s.ok()) return s;
    Command cmd{&extend_, {id_key(q.id, q.entity_key)}, {now_arg(q.now), std::string(q.owner), std::to_string(q.lease.count()), slack()}};
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, cmd.keys[0]);
    if (!a.ok()) return a.status();
    switch (int_at(**a, 0)) {
      case 0: return ok_status();
      case 1: return failed_precondition("the lease is not held by this owner");
      case 2: return failed_precondition("the lease expired");
      default: return internal_error("redis: unknown extend answer");
    }
  }

  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    if (id.empty()) return invalid_argument("inspect: empty id");
    return inspect_key(key_of(id), now);
  }

  std::string key_of(std::string_view id, std::string_view entity_key) const override {
    return o_.cluster ? entity_id_key(o_.prefix, entity_key, id) : key_of(id);
  }

  StatusOr<std::optional<RecordInfo>> inspect_with_entity(std::string_view id, std::string_view entity_key,
                                                          TimePoint now) override {
    if (id.empty()) return invalid_argument("inspect: empty id");
    if (entity_key.empty()) return invalid_argument("inspect: empty entity key");
    return inspect_key(key_of(id, entity_key), now);
  }

  StatusOr<std::optional<RecordInfo>> inspect_key(const std::string& key, TimePoint now) {
    Command cmd{&inspect_, {key}, {}};
    auto reply = run_one(cmd, 0);
    auto a = script_answer(reply, key);
    if (!a.ok()) return a.status();
    const Reply& r = **a;
    if (int_at(r, 0) == 0) return std::optional<RecordInfo>();
    if (r.elements.size() < 6) return internal_error("redis: unexpected inspect answer");
    return decode_record(r, to_unix_ms(now), key);
  }

  // Round trip 1: a plain SET NX PX per fresh-looking id (no script: what the claim
  // script would write for an absent key). Round trip 2, only for ids whose key
  // exists: the claim script, which answers as claim() does.
  // Requests with an entity key go to claim_entities (in one more round trip).
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override {
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

  std::vector<StatusOr<ClaimResult>> claim_batch_plain(std::span<const ClaimRequest> requests) {
    std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(ClaimResult{}));
    std::vector<Command> sets;
    std::vector<std::size_t> where;
    sets.reserve(requests.size());
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
        continue;
      }
      if (repeats && !seen.insert(q.id).second) {
        scripted.push_back(i);
        continue;
      }
      sets.push_back(fresh_claim_cmd(q));
      where.push_back(i);
    }
    auto replies = ex_->run(sets, 0, o_.wait_timeout);
    for (std::size_t k = 0; k < sets.size(); ++k) {
      auto granted = fresh_claim_answer(replies[k], sets[k].keys[0]);
      if (!granted.ok()) {
        out[where[k]] = granted.status();
      } else if (*granted) {
        out[where[k]] = ClaimResult::granted(0);
      } else {
        scripted.push_back(where[k]);  // the key exists: the script decides
      }
    }
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
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override {
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

  // One round trip. On a cluster one commit script per request (each in its own
  // slot); on a standalone server commit_many scripts of up to kKeysPerScript commits
  // that share owner, now and ttl (those arguments sent once), answering one byte per
  // commit.
  std::vector<Status> commit_batch_plain(std::span<const CommitRequest> requests) {
    std::vector<Status> out(requests.size());
    std::vector<Command> cmds;
    std::vector<std::size_t> where;
    cmds.reserve(requests.size());
    where.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (Status s = check_commit(requests[i]); !s.ok()) {
        out[i] = s;
        continue;
      }
      cmds.push_back(commit_cmd(requests[i]));
      where.push_back(i);
    }
    if (o_.cluster || cmds.size() < 2) {
      auto replies = ex_->run(cmds, o_.wait_replicas, o_.wait_timeout);
      for (std::size_t k = 0; k < cmds.size(); ++k) {
        auto a = script_answer(replies[k], cmds[k].keys[0]);
        out[where[k]] = a.ok() ? decode_commit(**a, o_, cmds[k].keys[0]) : a.status();
      }
      return out;
    }
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
      const bool shaped = r.ok() && r->type == Reply::Type::kArray && !r->elements.empty() &&
                          r->elements[0].str.size() == idx.size();
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
        } else {
          const char code = r->elements[0].str[k];
          Reply one;  // the single commit script's answer
          one.type = Reply::Type::kArray;
          one.replicas_acked = r->replicas_acked;  // the WAIT after the batch script
          Reply c;
          c.type = Reply::Type::kInteger;
          c.integer = code == '0' ? 0 : code == '1' ? 1 : code == '2' ? 2 : -1;
          one.elements.push_back(std::move(c));
          if (code != '0' && code != '1')
            one.elements.push_back(detail < r->elements.size() ? r->elements[detail++] : Reply{});
          auto a = script_answer(one, key);
          st = a.ok() ? decode_commit(**a, o_, key) : a.status();
        }
      }
    }
    return out;
  }

  // One round trip: the commit script and a plain SET NX PX for the claim, pipelined
  // (in this order on one connection when both keys are on one node). Only if the
  // claimed id's key exists, a second round trip runs the claim script.
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    if (c.entity || c.entity_key || q.entity_key) {
      Status committed = commit(c);
      return {std::move(committed), claim(q)};
    }
    if (Status s = check_commit(c); !s.ok()) return {s, claim(q)};
    if (Status s = check_claim(q); !s.ok()) return {commit(c), s};
    const std::vector<Command> cmds = {commit_cmd(c), fresh_claim_cmd(q)};
    auto replies = ex_->run(cmds, o_.wait_replicas, o_.wait_timeout);
    auto ca = script_answer(replies[0], cmds[0].keys[0]);
    CommitThenClaimResult out{ca.ok() ? decode_commit(**ca, o_, cmds[0].keys[0]) : ca.status(),
                              unavailable("not run")};
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

  StatusOr<std::size_t> purge_expired(TimePoint, std::size_t) override { return std::size_t{0}; }

  // --- entity records and the reorder buffer ---------------------------------------

  StatusOr<EntityRecord> read_entity(std::string_view key) override {
    if (Status s = check_entity_key(key, "read_entity"); !s.ok()) return s;
    const EntityKeys ks = entity_keys(o_.prefix, key);
    auto r = run_one(Command{nullptr, {ks.record}, {"HMGET", ks.record, "r", "v", "s"}}, 0);
    if (!r.ok()) return r.status();
    if (r->is_error()) return error_status(r->str, ks.record);
    if (r->type != Reply::Type::kArray || r->elements.size() != 3)
      return internal_error("redis: unexpected HMGET answer at \"" + printable(ks.record) + "\"");
    return decode_entity(r->elements[0], r->elements[1], r->elements[2], ks.record);
  }

  Status write_entity(const EntityWrite& w) override {
    if (Status s = check_write(w, "write_entity"); !s.ok()) return s;
    const EntityKeys ks = entity_keys(o_.prefix, w.key);
    Command cmd{&write_entity_, {ks.record}, {}};
    cmd.args.reserve(8);
    push_write_args(cmd.args, w);
    if (w.unbuffer) add_buffer_keys(cmd.keys, ks);
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, ks.record);
    if (!a.ok()) return a.status();
    if (int_at(**a, 0) == 4) return aborted("the entity record's revision changed; nothing was written");
    if (int_at(**a, 0) != 0) return internal_error("redis: unknown write_entity answer");
    account_removal(**a, w.key);
    return ok_status();
  }

  Status buffer_put(const BufferPut& p) override {
    if (Status s = check_buffer_put(p); !s.ok()) return s;
    const EntityKeys ks = entity_keys(o_.prefix, p.key);
    const std::size_t bytes = p.key.size() + p.id.size() + p.message.size();
    const std::string at = std::to_string(to_unix_ms(p.now));
    auto put_cmd = [&](const char* mode) {
      Command c{&buffer_put_, {ks.buffer, ks.times}, {}};
      c.args = {lex_lo(p.version), lex_hi(p.version), ver8(p.version) + encode_buffer_entry(p.id, p.message, to_unix_ms(p.now)),
                std::string(p.id), at, std::to_string(p.limits.per_key), std::to_string(p.limits.total),
                std::to_string(p.limits.total_bytes), std::to_string(bytes), std::string(p.key), mode};
      if (!o_.cluster) add_global_keys(c.keys);
      return c;
    };
    auto run_put = [&](const char* mode) -> StatusOr<std::int64_t> {  // the answer code
      Command c = put_cmd(mode);
      // The consumer acks a buffered message once this returns OK: with wait_replicas
      // the entry must have reached the replicas too, as a commit must.
      auto r = run_one(c, o_.wait_replicas);
      auto a = script_answer(r, ks.buffer);
      if (!a.ok()) return a.status();
      const std::int64_t code = int_at(**a, 0);
      if (code == 0 && o_.wait_replicas > 0 && (*a)->replicas_acked < o_.wait_replicas)
        return unavailable("redis: buffered entry landed on the master but " +
                           std::to_string(std::max((*a)->replicas_acked, 0)) + " of " +
                           std::to_string(o_.wait_replicas) + " replicas acknowledged it within " +
                           std::to_string(o_.wait_timeout.count()) + " ms");
      if (code == 6) return limit_status(str_at(**a, 1), p.limits, bytes);
      return code == 0 ? int_at(**a, 1) : -code;  // 1 stored, 0 already there, -5, -7
    };
    auto status_of = [&](std::int64_t code, const std::string& total_limit) -> Status {
      if (code >= 0) return ok_status();
      if (code == -5)
        return failed_precondition("reorder buffer: version " + std::to_string(p.version) +
                                   " of this key already holds another message id");
      if (code == -7) return limit_status(total_limit, p.limits, bytes);
      return internal_error("redis: unknown buffer_put answer");
    };
    if (!o_.cluster) {
      auto code = run_put("put");
      if (!code.ok()) return code.status();
      return status_of(*code, "");
    }
    // Cluster: reserve the totals (and index the key) in their slot, then store in
    // the entity's slot; give the reservation back if nothing was stored.
    auto reserve = account_cmd(1, static_cast<std::int64_t>(bytes), &p.limits, p.key, "lt", at);
    auto rr = run_one(reserve, 0);
    auto ra = script_answer(rr, totals_key_);
    if (!ra.ok()) return ra.status();
    if (int_at(**ra, 0) == 6) {
      auto code = run_put("check");
      if (!code.ok()) return code.status();
      return status_of(*code, str_at(**ra, 1));
    }
    auto code = run_put("put");
    if (code.ok() && *code == 1) return ok_status();
    static_cast<void>(run_one(account_cmd(-1, -static_cast<std::int64_t>(bytes), nullptr, p.key, "", "0"), 0));
    if (!code.ok()) return code.status();
    return status_of(*code, "");
  }

  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override {
    if (Status s = check_entity_key(key, "buffer_read"); !s.ok()) return s;
    std::vector<BufferEntry> out;
    if (max == 0) return out;
    const EntityKeys ks = entity_keys(o_.prefix, key);
    const std::size_t stop = std::min<std::size_t>(max, std::size_t{1} << 30) - 1;
    auto r = run_one(Command{&buffer_read_, {ks.buffer}, {std::to_string(stop)}}, 0);
    auto a = script_answer(r, ks.buffer);
    if (!a.ok()) return a.status();
    const Reply& e = **a;
    for (std::size_t i = 1; i + 3 < e.elements.size(); i += 4) {
      BufferEntry b;
      b.key = std::string(key);
      b.version = from_ver8(e.elements[i].str);
      b.id = e.elements[i + 1].str;
      b.message = e.elements[i + 2].str;
      b.buffered_at = from_unix_ms(e.elements[i + 3].integer);
      out.push_back(std::move(b));
    }
    return out;
  }

  Status buffer_remove(std::string_view key, std::uint64_t version) override {
    if (Status s = check_entity_key(key, "buffer_remove"); !s.ok()) return s;
    const EntityKeys ks = entity_keys(o_.prefix, key);
    Command cmd{&buffer_remove_, {ks.buffer, ks.times},
                {lex_lo(version), lex_hi(version), std::string(key), std::to_string(key.size())}};
    if (!o_.cluster) add_global_keys(cmd.keys);
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, ks.buffer);
    if (!a.ok()) return a.status();
    account_removal(**a, key);
    return ok_status();
  }

  // Reads the index from its oldest end in windows; every key it names is measured in
  // its own slot (count, lowest version, oldest_at). A key without entries (a stale
  // index member, cluster only) is removed from the index, measured once more and put
  // back if a buffer_put raced in meanwhile.
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override {
    BufferSummary out;
    const std::size_t window = std::min<std::size_t>(max_keys, 10'000) + 16;
    std::size_t start = 0;
    for (bool first = true;; first = false) {
      std::vector<Command> head;
      if (first) head.push_back(Command{nullptr, {totals_key_}, {"HMGET", totals_key_, "count", "bytes"}});
      if (max_keys > 0)
        head.push_back(Command{nullptr, {index_key_},
                               {"ZRANGE", index_key_, std::to_string(start), std::to_string(start + window - 1),
                                "WITHSCORES"}});
      if (head.empty()) break;
      auto replies = ex_->run(head, 0, o_.wait_timeout);
      for (const auto& r : replies) {
        if (!r.ok()) return r.status();
        if (r->is_error()) return error_status(r->str, index_key_);
      }
      if (first) {
        const Reply& t = *replies[0];
        out.count = static_cast<std::size_t>(std::max<std::int64_t>(parse_i64(t, 0), 0));
        out.bytes = static_cast<std::size_t>(std::max<std::int64_t>(parse_i64(t, 1), 0));
      }
      if (max_keys == 0) break;
      const Reply& idx = *replies.back();
      std::vector<std::string> members;
      for (std::size_t i = 0; i + 1 < idx.elements.size(); i += 2) members.push_back(idx.elements[i].str);
      std::vector<BufferedKey> found;
      std::vector<std::string> stale;
      auto measured = measure(members, &found, &stale);
      if (!measured.ok()) return measured;
      for (auto& k : found) out.keys.push_back(std::move(k));
      if (!stale.empty()) {
        std::vector<Command> rem;
        for (const auto& m : stale) rem.push_back(Command{nullptr, {index_key_}, {"ZREM", index_key_, m}});
        ex_->run(rem, 0, o_.wait_timeout);
        std::vector<BufferedKey> back;
        std::vector<std::string> gone;
        if (Status s = measure(stale, &back, &gone); !s.ok()) return s;
        std::vector<Command> re;
        for (const auto& k : back)
          re.push_back(Command{nullptr, {index_key_},
                               {"ZADD", index_key_, "LT", std::to_string(to_unix_ms(k.oldest_at)), k.key}});
        if (!re.empty()) ex_->run(re, 0, o_.wait_timeout);
        for (auto& k : back) out.keys.push_back(std::move(k));
      }
      start += members.size() - stale.size();
      if (out.keys.size() >= max_keys || members.size() < window) break;
    }
    std::stable_sort(out.keys.begin(), out.keys.end(),
                     [](const BufferedKey& a, const BufferedKey& b) { return a.oldest_at < b.oldest_at; });
    std::unordered_set<std::string> listed;  // a key put back by a race may be read twice
    std::size_t kept = 0;
    for (std::size_t i = 0; i < out.keys.size(); ++i) {
      if (!listed.insert(out.keys[i].key).second) continue;
      if (kept != i) out.keys[kept] = std::move(out.keys[i]);
      ++kept;
    }
    out.keys.resize(std::min(kept, max_keys));
    return out;
  }

 private:
  // The record key of an id: on a cluster in the entity's slot when claimed with an
  // entity key (so that one script reaches both); on a standalone server always
  // key_of(id), which every script can reach.
  std::string id_key(std::string_view id, const std::optional<std::string_view>& entity_key) const {
    return entity_key ? key_of(id, *entity_key) : key_of(id);
  }

  static Status check_write(const EntityWrite& w, const char* what) { return check_entity_write(w, what); }

  // expect, new revision, version, state, lo, hi, entity key, its length.
  static void push_write_args(std::vector<std::string>& args, const EntityWrite& w) {
    args.push_back(std::to_string(w.expect_revision));
    args.push_back(std::to_string(w.expect_revision + 1));
    args.push_back(w.version ? std::to_string(*w.version) : std::string());
    args.push_back(w.state ? std::string(*w.state) : std::string());
    args.push_back(w.unbuffer ? lex_lo(*w.unbuffer) : std::string());
    args.push_back(w.unbuffer ? lex_hi(*w.unbuffer) : std::string());
    args.push_back(std::string(w.key));
    args.push_back(std::to_string(w.key.size()));
  }

  void add_global_keys(std::vector<std::string>& keys) const {
    keys.push_back(totals_key_);
    keys.push_back(index_key_);
  }
  void add_buffer_keys(std::vector<std::string>& keys, const EntityKeys& ks) const {
    keys.push_back(ks.buffer);
    keys.push_back(ks.times);
    if (!o_.cluster) add_global_keys(keys);
  }

  // buffer_account (cluster): the totals change by dc/db (checked against `limits`
  // first if given); the index entry of key is updated as `mode` says.
  Command account_cmd(std::int64_t dc, std::int64_t db, const BufferLimits* limits, std::string_view key,
                      const char* mode, std::string score) const {
    return Command{&buffer_account_, {totals_key_, index_key_},
                   {std::to_string(dc), std::to_string(db), limits ? std::to_string(limits->total) : std::string(),
                    limits ? std::to_string(limits->total_bytes) : std::string(), std::string(key), mode,
                    std::move(score)}};
  }

  // After a script answered after_remove's {0, 1, bytes, has_oldest, oldest} (cluster:
  // an entry was removed), the totals and the index follow in their slot. A failure
  // here leaves the totals off by one entry (docs/stores.md); the removal stands.
  void account_removal(const Reply& a, std::string_view key) {
    if (int_at(a, 1) != 1) return;
    const bool has_oldest = int_at(a, 3) == 1;
    static_cast<void>(
        run_one(account_cmd(-1, -int_at(a, 2), nullptr, key, has_oldest ? "xx" : "", std::to_string(int_at(a, 4))), 0));
  }

  static Status limit_status(const std::string& which, const BufferLimits& l, std::size_t bytes) {
    if (which == "per_key")
      return resource_exhausted("reorder buffer limit per_key=" + std::to_string(l.per_key) + " reached for this key");
    if (which == "total")
      return resource_exhausted("reorder buffer limit total=" + std::to_string(l.total) + " reached");
    return resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(l.total_bytes) +
                              " would be exceeded by an entry of " + std::to_string(bytes) + " bytes");
  }

  static StatusOr<EntityRecord> decode_entity(const Reply& r, const Reply& v, const Reply& s, const std::string& key) {
    EntityRecord e;
    auto num = [&](const Reply& x, std::uint64_t* out) {
      if (x.type != Reply::Type::kString || x.str.empty()) return true;
      return std::from_chars(x.str.data(), x.str.data() + x.str.size(), *out).ec == std::errc{};
    };
    if (!num(r, &e.revision) || !num(v, &e.version))
      return data_loss("redis: key \"" + printable(key) + "\": the entity record holds a revision or version that is not a number");
    if (s.type == Reply::Type::kString) e.state = s.str;
    return e;
  }

  static std::int64_t parse_i64(const Reply& a, std::size_t i) {
    if (i >= a.elements.size() || a.elements[i].type != Reply::Type::kString) return 0;
    std::int64_t v = 0;
    const std::string& t = a.elements[i].str;
    std::from_chars(t.data(), t.data() + t.size(), v);
    return v;
  }

  // Measures each key in its own slot (one round trip): keys with entries go to
  // *found, the others to *empty.
  Status measure(const std::vector<std::string>& keys, std::vector<BufferedKey>* found, std::vector<std::string>* empty) {
    if (keys.empty()) return ok_status();
    std::vector<Command> cmds;
    cmds.reserve(keys.size());
    for (const auto& k : keys) {
      const EntityKeys ks = entity_keys(o_.prefix, k);
      cmds.push_back(Command{&buffer_key_info_, {ks.buffer, ks.times}, {}});
    }
    auto replies = ex_->run(cmds, 0, o_.wait_timeout);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto a = script_answer(replies[i], cmds[i].keys[0]);
      if (!a.ok()) return a.status();
      if (int_at(**a, 1) == 0) {
        empty->push_back(keys[i]);
        continue;
      }
      BufferedKey b;
      b.key = keys[i];
      b.count = static_cast<std::size_t>(int_at(**a, 1));
      b.lowest_version = from_ver8(str_at(**a, 2));
      b.oldest_at = from_unix_ms(int_at(**a, 3));
      found->push_back(std::move(b));
    }
    return ok_status();
  }

  // The commit (with entity write) of requests[i] for each i in `at`, in one round
  // trip; then, on a cluster, the totals of removed buffer entries in another.
  void commit_entities(std::span<const CommitRequest> requests, std::span<const std::size_t> at, std::vector<Status>& out) {
    std::vector<Command> cmds;
    std::vector<std::size_t> where;
    for (std::size_t i : at) {
      const CommitRequest& q = requests[i];
      if (Status s = check_commit(q); !s.ok()) {
        out[i] = s;
        continue;
      }
      if (Status s = check_write(*q.entity, "commit"); !s.ok()) {
        out[i] = s;
        continue;
      }
      const EntityWrite& w = *q.entity;
      const EntityKeys ks = entity_keys(o_.prefix, w.key);
      Command c = commit_cmd(q);  // key_of(id, entity key); now … slack
      c.script = &commit_entity_;
      c.keys.push_back(ks.record);
      push_write_args(c.args, w);
      if (w.unbuffer) add_buffer_keys(c.keys, ks);
      cmds.push_back(std::move(c));
      where.push_back(i);
    }
    if (cmds.empty()) return;
    auto replies = ex_->run(cmds, o_.wait_replicas, o_.wait_timeout);
    for (std::size_t k = 0; k < cmds.size(); ++k) {
      auto a = script_answer(replies[k], cmds[k].keys[0]);
      if (!a.ok()) {
        out[where[k]] = a.status();
        continue;
      }
      out[where[k]] = decode_commit(**a, o_, cmds[k].keys[0]);
      if (int_at(**a, 0) == 0) account_removal(**a, requests[where[k]].entity->key);
    }
  }

  // The claims with an entity key of requests[i] for each i in `at`: one round trip of
  // SET NX PX + HMGET of the entity per request; only for ids whose key exists, one
  // more of claim_entity scripts (which read the entity in the same step).
  void claim_entities(std::span<const ClaimRequest> requests, std::span<const std::size_t> at,
                      std::vector<StatusOr<ClaimResult>>& out) {
    std::vector<Command> cmds;
    std::vector<std::size_t> where;
    std::unordered_set<std::string> seen;
    std::vector<std::size_t> scripted;
    for (std::size_t i : at) {
      const ClaimRequest& q = requests[i];
      if (Status s = check_claim(q); !s.ok()) {
        out[i] = s;
        continue;
      }
      Command set = fresh_claim_cmd(q);
      if (!seen.insert(set.keys[0]).second) {
        scripted.push_back(i);
        continue;
      }
      const EntityKeys ks = entity_keys(o_.prefix, *q.entity_key);
      cmds.push_back(std::move(set));
      cmds.push_back(Command{nullptr, {ks.record}, {"HMGET", ks.record, "r", "v", "s"}});
      where.push_back(i);
    }
    if (!cmds.empty()) {
      auto replies = ex_->run(cmds, 0, o_.wait_timeout);
      for (std::size_t k = 0; k < where.size(); ++k) {
        auto granted = fresh_claim_answer(replies[2 * k], cmds[2 * k].keys[0]);
        if (!granted.ok()) {
          out[where[k]] = granted.status();
        } else if (!*granted) {
          scripted.push_back(where[k]);
        } else {
          const StatusOr<Reply>& e = replies[2 * k + 1];
          const std::string& rk = cmds[2 * k + 1].keys[0];
          if (!e.ok()) {
            out[where[k]] = e.status();
          } else if (e->is_error()) {
            out[where[k]] = error_status(e->str, rk);
          } else if (e->type != Reply::Type::kArray || e->elements.size() != 3) {
            out[where[k]] = internal_error("redis: unexpected HMGET answer");
          } else {
            auto rec = decode_entity(e->elements[0], e->elements[1], e->elements[2], rk);
            if (!rec.ok()) {
              out[where[k]] = rec.status();
            } else {
              ClaimResult c = ClaimResult::granted(0);
              c.entity = std::move(rec).value();
              out[where[k]] = std::move(c);
            }
          }
        }
      }
    }
    if (scripted.empty()) return;
    std::sort(scripted.begin(), scripted.end());
    std::vector<Command> scripts;
    for (std::size_t i : scripted) {
      Command c = claim_cmd(requests[i]);
      c.script = &claim_entity_;
      c.keys.push_back(entity_keys(o_.prefix, *requests[i].entity_key).record);
      scripts.push_back(std::move(c));
    }
    auto replies = ex_->run(scripts, 0, o_.wait_timeout);
    for (std::size_t k = 0; k < scripts.size(); ++k) {
      auto a = script_answer(replies[k], scripts[k].keys[0]);
      if (!a.ok()) {
        out[scripted[k]] = a.status();
        continue;
      }
      auto c = decode_claim(**a, scripts[k].keys[0]);
      if (c.ok() && c->status == ClaimStatus::kNew) {
        const Reply& r = **a;
        if (r.elements.size() < 5) {
          out[scripted[k]] = internal_error("redis: unexpected claim_entity answer");
          continue;
        }
        auto rec = decode_entity(r.elements[2], r.elements[3], r.elements[4], scripts[k].keys[1]);
        if (!rec.ok()) {
          out[scripted[k]] = rec.status();
          continue;
        }
        c->entity = std::move(rec).value();
      }
      out[scripted[k]] = std::move(c);
    }
  }

  static std::string now_arg(TimePoint t) { return std::to_string(to_unix_ms(t)); }
  std::string slack() const { return std::to_string(o_.expiry_slack.count()); }

  Command claim_cmd(const ClaimRequest& q) const {
    return Command{&claim_, {id_key(q.id, q.entity_key)},
                   {now_arg(q.now), std::string(q.owner), std::to_string(std::max<std::int64_t>(q.lease.count(), 1)),
                    fp_arg(q.fingerprint), slack()}};
  }

  // SET NX PX of the value the claim script writes for an absent key.
  Command fresh_claim_cmd(const ClaimRequest& q) const {
    const std::int64_t lease = std::max<std::int64_t>(q.lease.count(), 1);
    std::string key = id_key(q.id, q.entity_key);
    return Command{nullptr, {key},
                   {"SET", key, encode_fresh_lease(q.owner, to_unix_ms(q.now) + lease, q.fingerprint), "NX", "PX",
                    std::to_string(lease + o_.expiry_slack.count())}};
  }

  // True: the lease was granted (the key was absent); false: the key exists.
  static StatusOr<bool> fresh_claim_answer(const StatusOr<Reply>& r, const std::string& key) {
    if (!r.ok()) return r.status();
    if (r->is_error()) return error_status(r->str, key);
    return r->type == Reply::Type::kStatus;
  }

  Command commit_cmd(const CommitRequest& q) const {
    const std::int64_t ttl = std::max<std::int64_t>(q.ttl.count(), 1);
    return Command{&commit_, {q.entity ? key_of(q.id, q.entity->key) : id_key(q.id, q.entity_key)},
                   {now_arg(q.now), std::string(q.owner),
                    encode_done(q.outcome == Outcome::kDeadLettered ? 'x' : 'c', to_unix_ms(q.now) + ttl,
                                q.fingerprint, q.result),
                    lease_prefix(q.owner), std::to_string(ttl + o_.expiry_slack.count()), slack()}};
  }

  // Runs single-key script commands (whose last argument is the slack) in one round
  // trip and calls f(k, answer of cmds[k]) for each. On a standalone server they are
  // merged into `many` scripts of up to kKeysPerScript keys each (per_key arguments per
  // key, without the slack); on a cluster each is sent as it is.
  template <class F>
  void for_each_answer(const std::vector<Command>& cmds, const Script& many, std::size_t per_key, int wait, F&& f) {
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

  StatusOr<Reply> run_one(const Command& cmd, int wait_replicas) {
    auto out = ex_->run(std::span<const Command>(&cmd, 1), wait_replicas, o_.wait_timeout);
    return std::move(out.front());
  }

  // The same liveness rules as the scripts' load().
  // r: {1, s, o, l, e, n, f|nil, r|nil} from the inspect script. The same liveness
  // rules as the scripts' live().
  static StatusOr<std::optional<RecordInfo>> decode_record(const Reply& r, std::int64_t now, const std::string& key) {
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

  const Options o_;
  std::unique_ptr<Executor> ex_;
  Script claim_ = claim_script();
  Script commit_ = commit_script();
  Script release_ = release_script();
  Script extend_ = extend_script();
  Script inspect_ = inspect_script();
  Script claim_many_ = claim_many_script();
  Script commit_many_ = commit_many_script();
  Script claim_entity_ = claim_entity_script();
  Script commit_entity_ = commit_entity_script();
  Script write_entity_ = write_entity_script();
  Script buffer_put_ = buffer_put_script();
  Script buffer_read_ = buffer_read_script();
  Script buffer_remove_ = buffer_remove_script();
  Script buffer_key_info_ = buffer_key_info_script();
  Script buffer_account_ = buffer_account_script();
  const std::string totals_key_ = buffer_totals_key(o_.prefix);
  const std::string index_key_ = buffer_index_key(o_.prefix);
  // Keys per batch script: bounds how long one script holds the server (~1 ms).
  static constexpr std::size_t kKeysPerScript = 200;
};

Status validate(const Options& o) {
  if (o.endpoints.empty()) return invalid_argument("redis: no server given");
  for (const Endpoint& e : o.endpoints)
    if (e.host.empty() || e.port == 0) return invalid_argument("redis: an endpoint needs a host and a port > 0");
  if (o.prefix.find_first_of("{}") != std::string::npos)
    return invalid_argument("redis: prefix \"" + o.prefix + "\" contains '{' or '}'; the store adds the hash tag itself");
  if (o.db < 0) return invalid_argument("redis: db must be >= 0");
  if (o.cluster && o.db != 0) return invalid_argument("redis: a cluster has only database 0");
  if (!o.cluster && o.endpoints.size() > 1)
    return invalid_argument("redis: several servers given without cluster=1");
  if (o.password.empty() && !o.user.empty()) return invalid_argument("redis: a user needs a password");
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0)
    return invalid_argument("redis: connect and command timeouts must be > 0");
  if (o.wait_replicas < 0) return invalid_argument("redis: wait_replicas must be >= 0");
  if (o.wait_replicas > 0 && o.wait_timeout.count() <= 0) return invalid_argument("redis: wait_timeout must be > 0");
  if (o.reconnect_min.count() <= 0 || o.reconnect_max < o.reconnect_min)
    return invalid_argument("redis: need 0 < reconnect_min <= reconnect_max");
  if (o.cluster_retries < 0 || o.max_redirects < 0) return invalid_argument("redis: retry limits must be >= 0");
  if (o.expiry_slack.count() < 0) return invalid_argument("redis: expiry_slack must be >= 0");
  return ok_status();
}

}  // namespace
}  // namespace detail

StatusOr<std::shared_ptr<RedisStore>> open(const Options& options) {
  if (Status s = detail::validate(options); !s.ok()) return s;
  detail::ConnectOptions co;
  co.connect_timeout = options.connect_timeout;
  co.command_timeout = options.command_timeout;
  co.user = options.user;
  co.password = options.password;
  co.db = options.db;
  std::unique_ptr<detail::Executor> ex;
  if (options.cluster) {
    auto c = detail::make_cluster_executor(options, co);
    if (!c.ok()) return c.status();
    ex = std::move(c).value();
  } else {
    ex = detail::make_standalone_executor(options, co);
  }
  auto store = std::make_shared<detail::RedisStoreImpl>(options, std::move(ex));
  if (Status s = store->load_scripts(); !s.ok()) return s;
  return std::shared_ptr<RedisStore>(std::move(store));
}

}  // namespace idem::redis
