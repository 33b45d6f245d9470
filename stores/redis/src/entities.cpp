// Entity records and the reorder buffer of the Redis store (keys in entity_layout.hpp,
// scripts in entity_scripts.cpp, answer codes in script_codes.hpp).
#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "idem/backend/request_checks.hpp"
#include "record_codec.hpp"
#include "redis_store_impl.hpp"

namespace idem::redis::detail {
namespace {

// expect, new revision, version, state, lo, hi, entity key, its length.
void push_write_args(std::vector<std::string>& args, const EntityWrite& w) {
  args.push_back(std::to_string(w.expect_revision));
  args.push_back(std::to_string(w.expect_revision + 1));
  args.push_back(w.version ? std::to_string(*w.version) : std::string());
  args.push_back(w.state ? std::string(*w.state) : std::string());
  args.push_back(w.unbuffer ? lex_lo(*w.unbuffer) : std::string());
  args.push_back(w.unbuffer ? lex_hi(*w.unbuffer) : std::string());
  args.push_back(std::string(w.key));
  args.push_back(std::to_string(w.key.size()));
}

Status limit_status(const std::string& which, const BufferLimits& l, std::size_t bytes) {
  if (which == "per_key")
    return resource_exhausted("reorder buffer limit per_key=" + std::to_string(l.per_key) + " reached for this key");
  if (which == "total") return resource_exhausted("reorder buffer limit total=" + std::to_string(l.total) + " reached");
  return resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(l.total_bytes) +
                            " would be exceeded by an entry of " + std::to_string(bytes) + " bytes");
}

StatusOr<EntityRecord> decode_entity(const Reply& r, const Reply& v, const Reply& s, const std::string& key) {
  EntityRecord e;
  auto num = [&](const Reply& x, std::uint64_t* out) {
    if (x.type != Reply::Type::kString || x.str.empty()) return true;
    return std::from_chars(x.str.data(), x.str.data() + x.str.size(), *out).ec == std::errc{};
  };
  if (!num(r, &e.revision) || !num(v, &e.version))
    return data_loss("redis: key \"" + printable(key) +
                     "\": the entity record holds a revision or version that is not a number");
  if (s.type == Reply::Type::kString) e.state = s.str;
  return e;
}

std::int64_t parse_i64(const Reply& a, std::size_t i) {
  if (i >= a.elements.size() || a.elements[i].type != Reply::Type::kString) return 0;
  std::int64_t v = 0;
  const std::string& t = a.elements[i].str;
  std::from_chars(t.data(), t.data() + t.size(), v);
  return v;
}

// A granted claim with the entity record that the HMGET at `key` answered.
StatusOr<ClaimResult> granted_with_entity(const StatusOr<Reply>& e, const std::string& key) {
  if (!e.ok()) return e.status();
  if (e->is_error()) return error_status(e->str, key);
  if (e->type != Reply::Type::kArray || e->elements.size() != 3)
    return internal_error("redis: unexpected HMGET answer");
  auto rec = decode_entity(e->elements[0], e->elements[1], e->elements[2], key);
  if (!rec.ok()) return rec.status();
  ClaimResult c = ClaimResult::granted(0);
  c.entity = std::move(rec).value();
  return c;
}

}  // namespace

// --- entity records and the reorder buffer ---------------------------------------

StatusOr<EntityRecord> RedisStoreImpl::read_entity(std::string_view key) {
  if (Status s = check_entity_key(key, "read_entity"); !s.ok()) return s;
  const EntityKeys ks = entity_keys(o_.prefix, key);
  auto r = run_one(Command{nullptr, {ks.record}, {"HMGET", ks.record, "r", "v", "s"}}, 0);
  if (!r.ok()) return r.status();
  if (r->is_error()) return error_status(r->str, ks.record);
  if (r->type != Reply::Type::kArray || r->elements.size() != 3)
    return internal_error("redis: unexpected HMGET answer at \"" + printable(ks.record) + "\"");
  return decode_entity(r->elements[0], r->elements[1], r->elements[2], ks.record);
}

Status RedisStoreImpl::write_entity(const EntityWrite& w) {
  if (Status s = check_entity_write(w, "write_entity"); !s.ok()) return s;
  const EntityKeys ks = entity_keys(o_.prefix, w.key);
  Command cmd{&write_entity_, {ks.record}, {}};
  cmd.args.reserve(8);
  push_write_args(cmd.args, w);
  if (w.unbuffer) add_buffer_keys(cmd.keys, ks);
  auto r = run_one(cmd, 0);
  auto a = script_answer(r, ks.record);
  if (!a.ok()) return a.status();
  const auto code = static_cast<CommitCode>(int_at(**a, 0));
  if (code == CommitCode::kRevisionMismatch)
    return aborted("the entity record's revision changed; nothing was written");
  if (code != CommitCode::kCommitted) return internal_error("redis: unknown write_entity answer");
  account_removal(**a, w.key);
  return ok_status();
}

Status RedisStoreImpl::buffer_put(const BufferPut& p) {
  if (Status s = check_buffer_put(p); !s.ok()) return s;
  const std::size_t bytes = p.key.size() + p.id.size() + p.message.size();
  if (!o_.cluster) {
    auto put = put_entry(p, bytes, "put");
    if (!put.ok()) return put.status();
    return put_status(*put, p, bytes, "");
  }
  // Cluster: reserve the totals (and index the key) in their slot, then store in
  // the entity's slot; give the reservation back if nothing was stored.
  auto reserve =
      account_cmd(1, static_cast<std::int64_t>(bytes), &p.limits, p.key, "lt", std::to_string(to_unix_ms(p.now)));
  auto rr = run_one(reserve, 0);
  auto ra = script_answer(rr, totals_key_);
  if (!ra.ok()) return ra.status();
  if (static_cast<BufferCode>(int_at(**ra, 0)) == BufferCode::kLimit) {
    auto check = put_entry(p, bytes, "check");
    if (!check.ok()) return check.status();
    return put_status(*check, p, bytes, str_at(**ra, 1));
  }
  auto put = put_entry(p, bytes, "put");
  if (put.ok() && put->code == BufferCode::kOk && put->stored) return ok_status();
  static_cast<void>(run_one(account_cmd(-1, -static_cast<std::int64_t>(bytes), nullptr, p.key, "", "0"), 0));
  if (!put.ok()) return put.status();
  return put_status(*put, p, bytes, "");
}

StatusOr<RedisStoreImpl::PutAnswer> RedisStoreImpl::put_entry(const BufferPut& p, std::size_t bytes, const char* mode) {
  const EntityKeys ks = entity_keys(o_.prefix, p.key);
  const std::int64_t at = to_unix_ms(p.now);
  Command c{&buffer_put_, {ks.buffer, ks.times}, {}};
  c.args = {lex_lo(p.version),
            lex_hi(p.version),
            ver8(p.version) + encode_buffer_entry(p.id, p.message, at),
            std::string(p.id),
            std::to_string(at),
            std::to_string(p.limits.per_key),
            std::to_string(p.limits.total),
            std::to_string(p.limits.total_bytes),
            std::to_string(bytes),
            std::string(p.key),
            mode};
  if (!o_.cluster) add_global_keys(c.keys);
  // The consumer acks a buffered message once this returns OK: with wait_replicas
  // the entry must have reached the replicas too, as a commit must.
  auto r = run_one(c, o_.wait_replicas);
  auto a = script_answer(r, ks.buffer);
  if (!a.ok()) return a.status();
  const auto code = static_cast<BufferCode>(int_at(**a, 0));
  if (code == BufferCode::kOk && o_.wait_replicas > 0 && (*a)->replicas_acked < o_.wait_replicas)
    return unavailable("redis: buffered entry landed on the master but " +
                       std::to_string(std::max((*a)->replicas_acked, 0)) + " of " + std::to_string(o_.wait_replicas) +
                       " replicas acknowledged it within " + std::to_string(o_.wait_timeout.count()) + " ms");
  if (code == BufferCode::kLimit) return limit_status(str_at(**a, 1), p.limits, bytes);
  return PutAnswer{code, code == BufferCode::kOk && int_at(**a, 1) == 1};
}

Status RedisStoreImpl::put_status(const PutAnswer& put, const BufferPut& p, std::size_t bytes,
                                  const std::string& total_limit) {
  switch (put.code) {
    case BufferCode::kOk:
      return ok_status();
    case BufferCode::kVersionTaken:
      return failed_precondition("reorder buffer: version " + std::to_string(p.version) +
                                 " of this key already holds another message id");
    case BufferCode::kAbsent:
      return limit_status(total_limit, p.limits, bytes);  // 'check' after a total limit
    case BufferCode::kLimit:
      break;  // put_entry answers a limit as its Status
  }
  return internal_error("redis: unknown buffer_put answer");
}

StatusOr<std::vector<BufferEntry>> RedisStoreImpl::buffer_read(std::string_view key, std::size_t max) {
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

Status RedisStoreImpl::buffer_remove(std::string_view key, std::uint64_t version) {
  if (Status s = check_entity_key(key, "buffer_remove"); !s.ok()) return s;
  const EntityKeys ks = entity_keys(o_.prefix, key);
  Command cmd{&buffer_remove_,
              {ks.buffer, ks.times},
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
StatusOr<BufferSummary> RedisStoreImpl::buffer_summary(std::size_t max_keys) {
  BufferSummary out;
  const std::size_t window = std::min<std::size_t>(max_keys, 10'000) + 16;
  std::size_t start = 0;
  for (bool first = true;; first = false) {
    std::vector<Command> head;
    if (first) head.push_back(Command{nullptr, {totals_key_}, {"HMGET", totals_key_, "count", "bytes"}});
    if (max_keys > 0)
      head.push_back(
          Command{nullptr,
                  {index_key_},
                  {"ZRANGE", index_key_, std::to_string(start), std::to_string(start + window - 1), "WITHSCORES"}});
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
        re.push_back(
            Command{nullptr, {index_key_}, {"ZADD", index_key_, "LT", std::to_string(to_unix_ms(k.oldest_at)), k.key}});
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

void RedisStoreImpl::add_global_keys(std::vector<std::string>& keys) const {
  keys.push_back(totals_key_);
  keys.push_back(index_key_);
}

void RedisStoreImpl::add_buffer_keys(std::vector<std::string>& keys, const EntityKeys& ks) const {
  keys.push_back(ks.buffer);
  keys.push_back(ks.times);
  if (!o_.cluster) add_global_keys(keys);
}

// buffer_account (cluster): the totals change by dc/db (checked against `limits`
// first if given); the index entry of key is updated as `mode` says.
Command RedisStoreImpl::account_cmd(std::int64_t dc, std::int64_t db, const BufferLimits* limits, std::string_view key,
                                    const char* mode, std::string score) const {
  return Command{
      &buffer_account_,
      {totals_key_, index_key_},
      {std::to_string(dc), std::to_string(db), limits ? std::to_string(limits->total) : std::string(),
       limits ? std::to_string(limits->total_bytes) : std::string(), std::string(key), mode, std::move(score)}};
}

// After a script answered after_remove's {0, 1, bytes, has_oldest, oldest} (cluster:
// an entry was removed), the totals and the index follow in their slot. A failure
// here leaves the totals off by one entry (docs/stores.md); the removal stands.
void RedisStoreImpl::account_removal(const Reply& a, std::string_view key) {
  if (int_at(a, 1) != 1) return;
  const bool has_oldest = int_at(a, 3) == 1;
  static_cast<void>(
      run_one(account_cmd(-1, -int_at(a, 2), nullptr, key, has_oldest ? "xx" : "", std::to_string(int_at(a, 4))), 0));
}

// Measures each key in its own slot (one round trip): keys with entries go to
// *found, the others to *empty.
Status RedisStoreImpl::measure(const std::vector<std::string>& keys, std::vector<BufferedKey>* found,
                               std::vector<std::string>* empty) {
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
void RedisStoreImpl::commit_entities(std::span<const CommitRequest> requests, std::span<const std::size_t> at,
                                     std::vector<Status>& out) {
  std::vector<Command> cmds;
  std::vector<std::size_t> where;
  for (std::size_t i : at) {
    const CommitRequest& q = requests[i];
    if (Status s = check_commit(q); !s.ok()) {
      out[i] = s;
      continue;
    }
    if (Status s = check_entity_write(*q.entity, "commit"); !s.ok()) {
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
    if (static_cast<CommitCode>(int_at(**a, 0)) == CommitCode::kCommitted)
      account_removal(**a, requests[where[k]].entity->key);
  }
}

// The claims with an entity key of requests[i] for each i in `at`: one round trip of
// SET NX PX + HMGET of the entity per request; only for ids whose key exists, one
// more of claim_entity scripts (which read the entity in the same step).
void RedisStoreImpl::claim_entities(std::span<const ClaimRequest> requests, std::span<const std::size_t> at,
                                    std::vector<StatusOr<ClaimResult>>& out) {
  std::vector<Command> cmds;  // per request: SET NX PX, HMGET
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
      scripted.push_back(i);  // a repeated id: the script decides, after the first
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
        scripted.push_back(where[k]);  // the key exists
      } else {
        out[where[k]] = granted_with_entity(replies[2 * k + 1], cmds[2 * k + 1].keys[0]);
      }
    }
  }
  if (!scripted.empty()) claim_entities_scripted(requests, scripted, out);
}

void RedisStoreImpl::claim_entities_scripted(std::span<const ClaimRequest> requests, std::vector<std::size_t>& scripted,
                                             std::vector<StatusOr<ClaimResult>>& out) {
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
    if (c.ok() && c->status == ClaimStatus::kNew) {  // ClaimCode::kGranted
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

}  // namespace idem::redis::detail
