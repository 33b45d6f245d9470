// The Store contract on Redis: request → script command → decoded answer.
#include "idem/redis_store.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "cluster/cluster_executor.hpp"
#include "executor.hpp"
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
      return Status::ok();
    case 1: return failed_precondition("id is already completed");
    case 2: return failed_precondition("lease is held by " + printable(str_at(a, 1)));
    default: return internal_error("redis: key \"" + printable(key) + "\": unknown commit answer");
  }
}

class RedisStoreImpl final : public RedisStore {
 public:
  RedisStoreImpl(Options o, std::unique_ptr<Executor> ex) : o_(std::move(o)), ex_(std::move(ex)) {}

  // Loads the scripts (SCRIPT LOAD) so that calls send EVALSHA.
  Status load_scripts() {
    for (Script* s : {&claim_, &commit_, &release_, &extend_, &inspect_, &claim_many_, &commit_many_}) {
      auto r = ex_->run_anywhere({"SCRIPT", "LOAD", s->body});
      if (!r.ok()) return r.status();
      if (r->is_error()) return error_status(r->str, "(SCRIPT LOAD)");
      s->sha = r->str;
    }
    return Status::ok();
  }

  StoreCapabilities capabilities() const override {
    StoreCapabilities c;
    c.durable = true;  // survives consumer crashes; server crashes: see docs/stores.md
    c.shared = true;
    c.native_ttl = true;
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
    if (q.id.empty()) return invalid_argument("claim: empty id");
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
    if (q.id.empty()) return invalid_argument("commit: empty id");
    Command cmd = commit_cmd(q);
    auto r = run_one(cmd, o_.wait_replicas);
    auto a = script_answer(r, cmd.keys[0]);
    if (!a.ok()) return a.status();
    return decode_commit(**a, o_, cmd.keys[0]);
  }

  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override {
    if (q.id.empty()) return invalid_argument("release: empty id");
    Command cmd{&release_, {key_of(q.id)},
                {now_arg(q.now), std::string(q.owner), q.count_retry ? "1" : "0",
                 std::to_string(std::max<std::int64_t>(q.retry_ttl.count(), 1)), slack()}};
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, cmd.keys[0]);
    if (!a.ok()) return a.status();
    return static_cast<std::uint32_t>(int_at(**a, 1));
  }

  Status extend(const ExtendRequest& q) override {
    if (q.id.empty()) return invalid_argument("extend: empty id");
    Command cmd{&extend_, {key_of(q.id)}, {now_arg(q.now), std::string(q.owner), std::to_string(q.lease.count()), slack()}};
    auto r = run_one(cmd, 0);
    auto a = script_answer(r, cmd.keys[0]);
    if (!a.ok()) return a.status();
    switch (int_at(**a, 0)) {
      case 0: return Status::ok();
      case 1: return failed_precondition("the lease is not held by this owner");
      case 2: return failed_precondition("the lease expired");
      default: return internal_error("redis: unknown extend answer");
    }
  }

  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    if (id.empty()) return invalid_argument("inspect: empty id");
    const std::string key = key_of(id);
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
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override {
    std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(invalid_argument("claim: empty id")));
    std::vector<Command> sets;
    std::vector<std::size_t> where;
    std::unordered_set<std::string_view> seen;
    std::vector<std::size_t> scripted;  // repeated ids go to the script, in order
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const ClaimRequest& q = requests[i];
      if (q.id.empty()) continue;
      if (!seen.insert(q.id).second) {
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

  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override {
    std::vector<Status> out(requests.size(), invalid_argument("commit: empty id"));
    std::vector<Command> cmds;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].id.empty()) continue;
      cmds.push_back(commit_cmd(requests[i]));
      where.push_back(i);
    }
    for_each_answer(cmds, commit_many_, 5, o_.wait_replicas, [&](std::size_t k, StatusOr<const Reply*> a) {
      out[where[k]] = a.ok() ? decode_commit(**a, o_, cmds[k].keys[0]) : a.status();
    });
    return out;
  }

  // One round trip: the commit script and a plain SET NX PX for the claim, pipelined
  // (in this order on one connection when both keys are on one node). Only if the
  // claimed id's key exists, a second round trip runs the claim script.
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    if (c.id.empty()) return {invalid_argument("commit: empty id"), claim(q)};
    if (q.id.empty()) return {commit(c), invalid_argument("claim: empty id")};
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

 private:
  static std::string now_arg(TimePoint t) { return std::to_string(to_unix_ms(t)); }
  std::string slack() const { return std::to_string(o_.expiry_slack.count()); }

  Command claim_cmd(const ClaimRequest& q) const {
    return Command{&claim_, {key_of(q.id)},
                   {now_arg(q.now), std::string(q.owner), std::to_string(std::max<std::int64_t>(q.lease.count(), 1)),
                    fp_arg(q.fingerprint), slack()}};
  }

  // SET NX PX of the value the claim script writes for an absent key.
  Command fresh_claim_cmd(const ClaimRequest& q) const {
    const std::int64_t lease = std::max<std::int64_t>(q.lease.count(), 1);
    std::string key = key_of(q.id);
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
    return Command{&commit_, {key_of(q.id)},
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
  return Status::ok();
}

}  // namespace
}  // namespace detail

StatusOr<std::shared_ptr<RedisStore>> open(const Options& options) {
  if (Status s = detail::validate(options); !s.is_ok()) return s;
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
  if (Status s = store->load_scripts(); !s.is_ok()) return s;
  return std::shared_ptr<RedisStore>(std::move(store));
}

}  // namespace idem::redis
