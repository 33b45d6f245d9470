#include "batch_pipelines.hpp"

#include <algorithm>
#include <optional>

#include "cluster/key_slot.hpp"
#include "record_codec.hpp"

namespace idem::redis::detail {

void FreshClaims::encode(std::size_t k, bool, RespWriter& w) {
  const ClaimRequest& q = requests_[where_[k]];
  const std::int64_t lease = std::max<std::int64_t>(q.lease.count(), 1);
  value_.clear();
  append_fresh_lease(value_, q.owner, to_unix_ms(q.now) + lease, q.fingerprint);
  w.command(6);
  w.arg("SET");
  w.arg_key(o_.prefix, q.id);
  w.arg(value_);
  w.arg("NX");
  w.arg("PX");
  w.arg_int(lease + o_.expiry_slack.count());
}

// As fresh_claim_answer: a status reply (OK) is granted, an error is its Status,
// anything else (nil) means that the key exists.
void FreshClaims::take(std::size_t k, const ReplyView& r) {
  const std::size_t i = where_[k];
  switch (r.type()) {
    case Reply::Type::kStatus:
      out_[i] = ClaimResult::granted(0);
      break;
    case Reply::Type::kError:
      out_[i] = error_status(r.str(), store_.key_of(requests_[i].id));
      break;
    default:
      scripted_.push_back(i);
      break;
  }
}

CommitMany::CommitMany(const RedisStoreImpl& store, const Options& o, const Script& script,
                       std::span<const CommitRequest> requests, std::span<const std::size_t> where,
                       std::vector<Status>& out, std::size_t max_keys, bool by_slot)
    : store_(store), o_(o), script_(script), requests_(requests), where_(where), out_(out) {
  int group_slot = -1;
  for (std::size_t k = 0; k < where_.size(); ++k) {
    const int slot = by_slot ? key_slot(store_.key_of(request(k).id)) : 0;
    const bool fits = !groups_.empty() && k - groups_.back().first < max_keys && slot == group_slot &&
                      shareable(request(groups_.back().first), request(k));
    group_slot = slot;
    if (fits) {
      groups_.back().second = k + 1;
    } else {
      groups_.emplace_back(k, k + 1);
    }
  }
}

bool CommitMany::shareable(const CommitRequest& a, const CommitRequest& b) {
  return to_unix_ms(a.now) == to_unix_ms(b.now) && a.owner == b.owner &&
         std::max<std::int64_t>(a.ttl.count(), 1) == std::max<std::int64_t>(b.ttl.count(), 1);
}

// commit_many: KEYS the records; ARGV slack, now, owner, lease prefix, px, then one
// value per key (scripts.cpp).
void CommitMany::encode(std::size_t g, bool eval, RespWriter& w) {
  const auto [first, end] = groups_[g];
  const std::size_t n = end - first;
  const CommitRequest& head = request(first);
  const std::int64_t ttl = std::max<std::int64_t>(head.ttl.count(), 1);
  const std::int64_t now = to_unix_ms(head.now);
  const bool use_eval = eval || script_.sha.empty();
  w.command(3 + n + 5 + n);
  w.arg(use_eval ? std::string_view("EVAL") : std::string_view("EVALSHA"));
  w.arg(use_eval ? script_.body : script_.sha);
  w.arg_int(static_cast<std::int64_t>(n));
  for (std::size_t k = first; k < end; ++k) w.arg_key(o_.prefix, request(k).id);
  w.arg_int(o_.expiry_slack.count());
  w.arg_int(now);
  w.arg(head.owner);
  w.arg(lease_prefix(head.owner));
  w.arg_int(ttl + o_.expiry_slack.count());
  for (std::size_t k = first; k < end; ++k) {
    const CommitRequest& q = request(k);
    value_.clear();
    append_done(value_, q.outcome == Outcome::kDeadLettered ? 'x' : 'c', now + ttl, q.fingerprint, q.result);
    w.arg(value_);
  }
}

// The answer is {codes, details…}: one code character per key; '0' (kCommitted) is
// read in place, any other code through the single commit script's decoder.
void CommitMany::take(std::size_t g, const ReplyView& r) {
  const auto [first, end] = groups_[g];
  const std::size_t n = end - first;
  const bool shaped = r.type() == Reply::Type::kArray && r.size() > 0 && r.at(0).str().size() == n;
  const std::string_view codes = shaped ? r.at(0).str() : std::string_view();
  std::optional<Reply> copy;  // the whole answer, copied only for an uncommon code
  std::size_t detail = 1;
  for (std::size_t k = 0; k < n; ++k) {
    Status& st = out_[where_[first + k]];
    if (shaped && codes[k] == '0') {
      st = ok_status();
      continue;
    }
    const std::string key = store_.key_of(request(first + k).id);
    if (r.is_error()) {
      st = error_status(r.str(), key);
    } else if (!shaped) {
      st = internal_error("redis: unexpected batch answer");
    } else {
      if (!copy) copy = r.to_reply();
      st = uncommon(*copy, k, detail, key);
    }
  }
}

Status CommitMany::uncommon(const Reply& answer, std::size_t k, std::size_t& detail, const std::string& key) const {
  Reply one = commit_many_answer(answer, k, detail);
  auto a = script_answer(one, key);
  return a.ok() ? decode_commit(**a, o_, key) : a.status();
}

void CommitMany::fail(std::size_t g, const Status& s) {
  for (std::size_t k = groups_[g].first; k < groups_[g].second; ++k) out_[where_[k]] = s;
}

}  // namespace idem::redis::detail
