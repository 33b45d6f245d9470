// The record operations of the PostgreSQL store and its connection pool.
#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "postgres_store_impl.hpp"

namespace idem::postgres::detail {
namespace {

// The thread's open transaction per store (begin / begin_batch).
struct Binding {
  const PgStore* store;
  Conn* conn;
  bool batch;
};
thread_local std::vector<Binding> t_bindings;

// A claim's answer read from one row of the claim statements (statements.cpp);
// nullopt when the row that refused was read before a concurrent write and tells
// nothing (the claim is tried again).
std::optional<ClaimResult> read_claim(const PGresult* r, int row, const ClaimRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  if (get_bool(r, row, 1)) {
    ClaimResult c = ClaimResult::granted(static_cast<std::uint32_t>(get_i32(r, row, 2)));
    if (q.entity_key && !is_null(r, row, 9)) {
      c.entity.revision = static_cast<std::uint64_t>(get_i64(r, row, 9));
      c.entity.version = static_cast<std::uint64_t>(get_i64(r, row, 10));
      c.entity.state = get_bytes(r, row, 11);
    }
    return c;
  }
  if (is_null(r, row, 3)) return std::nullopt;  // no row in the statement's snapshot
  const int state = get_i16(r, row, 3);
  std::optional<std::uint64_t> fp;
  if (!is_null(r, row, 6)) fp = static_cast<std::uint64_t>(get_i64(r, row, 6));
  if (state >= kRowCompleted && get_i64(r, row, 8) > now) {
    const std::optional<std::string> result = get_opt_bytes(r, row, 7);
    const HeldRecord held{fp, result, state == kRowDeadLettered};
    ClaimResult c = *answer_held(q, now, &held, nullptr);
    c.outbox_unsent = c.status == ClaimStatus::kCompleted && q.check_outbox && get_bool(r, row, 12);
    return c;
  }
  const std::int64_t until = get_i64(r, row, 5);
  if (state == kRowInProgress && until > now) {
    const std::string owner = get_bytes(r, row, 4);
    const HeldLease held{fp, owner, until};
    return answer_held(q, now, nullptr, &held);
  }
  return std::nullopt;
}

constexpr int kClaimAttempts = 20;

}  // namespace

// --- pool -----------------------------------------------------------------------

ConnRef::~ConnRef() {
  if (owned_ && store_) store_->give_back(std::move(owned_));
}

PgStore::PgStore(Options options) : options_(std::move(options)), sql_(quote_identifier(options_.schema)) {
  options_.connection = with_network_timeouts(std::move(options_.connection));
  for (const auto& [k, v] : options_.connection)
    if (k == "password") password_ = v;
}

PgStore::~PgStore() {
  std::erase_if(t_bindings, [this](const Binding& b) { return b.store == this; });
}

StatusOr<std::unique_ptr<Conn>> PgStore::connect() {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : options_.connection) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  auto c = std::make_unique<Conn>(PQconnectdbParams(keys.data(), values.data(), 0));
  if (c->get() == nullptr) return unavailable("postgres: cannot connect: out of memory");
  if (PQstatus(c->get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c->get());
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (!password_.empty()) {
      for (std::size_t at = msg.find(password_); at != std::string::npos; at = msg.find(password_, at))
        msg.replace(at, password_.size(), "***");
    }
    return unavailable("postgres: cannot connect: " + msg);
  }
  PQsetNoticeProcessor(
      c->get(), [](void*, const char*) {}, nullptr);
  // Best effort: a server or proxy that refuses these settings still serves the store.
  PQclear(PQexec(c->get(), kServerNetworkTimeouts));
  return c;
}

std::pair<Conn*, bool> PgStore::bound() const {
  for (const auto& b : t_bindings)
    if (b.store == this) return {b.conn, b.batch};
  return {nullptr, false};
}

void PgStore::bind(Conn* c, bool batch) { t_bindings.push_back({this, c, batch}); }

void PgStore::unbind() {
  std::erase_if(t_bindings, [this](const Binding& b) { return b.store == this; });
}

StatusOr<ConnRef> PgStore::acquire() {
  if (auto [c, batch] = bound(); c != nullptr) return ConnRef(c);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !idle_.empty() || open_ < options_.pool_size; });
  if (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    return ConnRef(this, std::move(c));
  }
  ++open_;
  lock.unlock();
  auto c = connect();
  if (!c.ok()) {
    lock.lock();
    --open_;
    cv_.notify_one();
    return c.status();
  }
  return ConnRef(this, std::move(c).value());
}

void PgStore::give_back(std::unique_ptr<Conn> c) {
  if (c->broken() || c->in_transaction()) c.reset();  // a lost connection, or one left mid-transaction
  std::lock_guard lock(mu_);
  if (c) {
    idle_.push_back(std::move(c));
  } else {
    --open_;
  }
  cv_.notify_one();
}

Status PgStore::in_transaction(const std::function<Status(Conn&)>& f) {
  auto c = acquire();
  if (!c.ok()) return c.status();
  Conn& conn = **c;
  const bool nested = c->joined();
  if (Status s = conn.exec(nested ? "SAVEPOINT idem_op" : "BEGIN"); !s.ok()) return s;
  Status s = f(conn);
  if (s.ok()) s = conn.exec(nested ? "RELEASE SAVEPOINT idem_op" : "COMMIT");
  if (!s.ok() && !conn.broken()) {
    if (nested) {
      (void)conn.exec("ROLLBACK TO SAVEPOINT idem_op");
      (void)conn.exec("RELEASE SAVEPOINT idem_op");
    } else {
      (void)conn.exec("ROLLBACK");
    }
  }
  return s;
}

Status PgStore::fault(std::string_view point) const {
  return options_.fault_hook ? options_.fault_hook(point) : ok_status();
}

StoreCapabilities PgStore::capabilities() const {
  StoreCapabilities c;
  c.durable = true;
  c.shared = true;
  c.transactional = true;
  c.batch_transactions = true;
  c.entity_chains = true;
  return c;
}

// --- claim -----------------------------------------------------------------------

StatusOr<ClaimResult> PgStore::claim_on(Conn& c, const ClaimRequest& q, bool async) {
  const std::int64_t now = to_unix_ms(q.now);
  Params p;
  p.bytes(q.id).bytes(q.owner).i64(now + q.lease.count()).i64(encode_fp(q.fingerprint)).i64(now).bytes(q.entity_key);
  p.i64(q.check_outbox ? 1 : 0);
  for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
    auto r = c.run(async ? sql_.claim_async : sql_.claim, p);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 1) {
      if (auto answer = read_claim(r->get(), 0, q)) return *answer;
    }
  }
  return unavailable("postgres: claim: the record kept changing under concurrent writers; try again");
}

StatusOr<ClaimResult> PgStore::claim(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  auto c = acquire();
  if (!c.ok()) return c.status();
  return claim_on(**c, q, !c->joined());
}

std::vector<StatusOr<ClaimResult>> PgStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(ClaimResult()));
  std::vector<std::size_t> valid;
  std::set<std::string_view> ids;
  bool single = true;  // one statement can answer them all
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (Status s = check_claim(requests[i]); !s.ok()) {
      out[i] = s;
      continue;
    }
    valid.push_back(i);
    single &= ids.insert(requests[i].id).second && requests[i].now == requests[valid.front()].now;
  }
  auto c = acquire();
  if (!c.ok()) {
    for (std::size_t i : valid) out[i] = c.status();
    return out;
  }
  std::vector<std::size_t> again;  // answered by one claim each
  if (single && valid.size() > 1) {
    // By id: concurrent batches lock rows in one order.
    std::sort(valid.begin(), valid.end(),
              [&](std::size_t a, std::size_t b) { return requests[a].id < requests[b].id; });
    bool keyed = false, check_outbox = false;
    std::vector<std::optional<std::string_view>> id, owner, ek;
    std::vector<std::optional<std::int64_t>> until, fp;
    for (std::size_t i : valid) {
      const auto& q = requests[i];
      id.emplace_back(q.id);
      owner.emplace_back(q.owner);
      until.emplace_back(to_unix_ms(q.now) + q.lease.count());
      fp.push_back(encode_fp(q.fingerprint));
      ek.push_back(q.entity_key);
      keyed |= q.entity_key.has_value();
      check_outbox |= q.check_outbox;  // one flag for the statement; read_claim keeps each request's
    }
    Params p;
    p.bytes_array(id).bytes_array(owner).i64_array(until).i64_array(fp);
    if (keyed) p.bytes_array(ek);
    p.i64(to_unix_ms(requests[valid.front()].now));
    if (keyed) p.i64(check_outbox ? 1 : 0);
    const Sql& sql = keyed ? (c->joined() ? sql_.claim_batch : sql_.claim_batch_async)
                           : (c->joined() ? sql_.claim_lean : sql_.claim_lean_async);
    auto r = (*c)->run(sql, p);
    if (!r.ok()) {
      for (std::size_t i : valid) out[i] = r.status();
      return out;
    }
    if (keyed) {
      for (int row = 0; row < PQntuples(r->get()); ++row) {
        const std::size_t i = valid[static_cast<std::size_t>(get_i64(r->get(), row, 0) - 1)];
        if (auto answer = read_claim(r->get(), row, requests[i])) {
          out[i] = std::move(*answer);
        } else {
          again.push_back(i);
        }
      }
    } else {
      std::unordered_map<std::string_view, std::size_t> index;
      for (std::size_t i : valid) index.emplace(requests[i].id, i);
      for (int row = 0; row < PQntuples(r->get()); ++row) {
        auto it = index.find(
            std::string_view(PQgetvalue(r->get(), row, 0), static_cast<std::size_t>(PQgetlength(r->get(), row, 0))));
        if (it == index.end()) continue;
        out[it->second] = ClaimResult::granted(static_cast<std::uint32_t>(get_i32(r->get(), row, 1)));
        index.erase(it);
      }
      for (const auto& [ignored, i] : index) again.push_back(i);
    }
  } else {
    again = valid;
  }
  for (std::size_t i : again) out[i] = claim_on(**c, requests[i], !c->joined());
  return out;
}

// --- commit ----------------------------------------------------------------------

Status PgStore::refusal(Conn& c, std::string_view id, std::int64_t now) {
  Params p;
  p.bytes(id);
  auto r = c.run(sql_.read_row, p);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 1) {
    const int state = get_i16(r->get(), 0, 0);
    if (state >= kRowCompleted && get_i64(r->get(), 0, 6) > now)
      return failed_precondition("commit: the id is already completed");
    if (state == kRowInProgress)
      return failed_precondition("commit: the lease is held by " + get_bytes(r->get(), 0, 1));
  }
  return failed_precondition("commit: refused (the record changed meanwhile)");
}

Status PgStore::commit_record(Conn& c, const CommitRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  Params p;
  p.bytes(q.id)
      .i64(q.outcome == Outcome::kDeadLettered ? kRowDeadLettered : kRowCompleted)
      .bytes(q.owner)
      .i64(encode_fp(q.fingerprint))
      .bytes(q.result)
      .i64(now + q.ttl.count())
      .i64(now);
  auto r = c.run(sql_.commit, p);
  if (!r.ok()) return r.status();
  if (changed(r->get()) == 1) return ok_status();
  return refusal(c, q.id, now);
}

Status PgStore::commit_in(Conn& c, const CommitRequest& q) {
  if (Status s = fault("commit.before_write"); !s.ok()) return s;
  if (Status s = commit_record(c, q); !s.ok()) return s;
  std::vector<const OutboxEntry*> outbox;
  for (const OutboxEntry& e : q.outbox) outbox.push_back(&e);
  if (Status s = write_outbox_in(c, outbox); !s.ok()) return s;
  if (Status s = fault("commit.after_record"); !s.ok()) return s;
  if (!q.entity) return ok_status();
  if (Status s = write_entity_in(c, *q.entity); !s.ok()) return s;
  return fault("commit.after_entity");
}

Status PgStore::commit(const CommitRequest& q) {
  if (Status s = check_commit(q); !s.ok()) return s;
  if (!q.entity && q.outbox.empty() && !options_.fault_hook) {  // one statement
    auto c = acquire();
    if (!c.ok()) return c.status();
    return commit_record(**c, q);
  }
  return in_transaction([&](Conn& c) { return commit_in(c, q); });
}

std::vector<Status> PgStore::commit_batch(std::span<const CommitRequest> requests) {
  std::set<std::string_view> ids;
  bool single = !options_.fault_hook && requests.size() > 1;
  for (const auto& q : requests) {
    single = single && !q.entity && q.outbox.empty() && ids.insert(q.id).second && q.now == requests.front().now;
    if (!single) break;
  }
  return single ? commit_batch_unnest(requests) : commit_batch_transaction(requests);
}

std::vector<Status> PgStore::commit_batch_unnest(std::span<const CommitRequest> requests) {
  std::vector<Status> out(requests.size(), ok_status());
  std::vector<std::size_t> valid;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (Status s = check_commit(requests[i]); !s.ok()) {
      out[i] = s;
    } else {
      valid.push_back(i);
    }
  }
  if (valid.empty()) return out;
  // By id: concurrent batches lock rows in one order.
  std::sort(valid.begin(), valid.end(), [&](std::size_t a, std::size_t b) { return requests[a].id < requests[b].id; });
  std::vector<std::optional<std::string_view>> id, owner, result;
  std::vector<std::optional<std::int64_t>> state, fp, expires;
  for (std::size_t i : valid) {
    const auto& q = requests[i];
    id.emplace_back(q.id);
    state.emplace_back(q.outcome == Outcome::kDeadLettered ? kRowDeadLettered : kRowCompleted);
    owner.emplace_back(q.owner);
    fp.push_back(encode_fp(q.fingerprint));
    result.push_back(q.result);
    expires.emplace_back(to_unix_ms(q.now) + q.ttl.count());
  }
  auto c = acquire();
  if (!c.ok()) return std::vector<Status>(requests.size(), c.status());
  bool same = true;  // the requests differ only in their ids
  for (std::size_t k = 1; k < id.size() && same; ++k)
    same = state[k] == state[0] && owner[k] == owner[0] && fp[k] == fp[0] && result[k] == result[0] &&
           expires[k] == expires[0];
  Params p;
  if (same) {
    p.bytes_array(id).i64(state[0]).bytes(owner[0]).i64(fp[0]).bytes(result[0]).i64(expires[0]);
  } else {
    p.bytes_array(id).i64_array(state).bytes_array(owner).i64_array(fp).bytes_array(result).i64_array(expires);
  }
  p.i64(to_unix_ms(requests.front().now));
  auto r = (*c)->run(same ? sql_.commit_batch_same : sql_.commit_batch, p);
  if (!r.ok()) return std::vector<Status>(requests.size(), r.status());
  std::unordered_map<std::string_view, std::size_t> rest;  // not written by the statement
  for (std::size_t i : valid) rest.emplace(requests[i].id, i);
  for (int row = 0; row < PQntuples(r->get()); ++row)
    rest.erase(std::string_view(PQgetvalue(r->get(), row, 0), static_cast<std::size_t>(PQgetlength(r->get(), row, 0))));
  // An id without a row (never claimed, or purged) is inserted; a refusal is explained.
  for (std::size_t i : valid)
    if (rest.contains(requests[i].id)) out[i] = commit_record(**c, requests[i]);
  return out;
}

std::vector<Status> PgStore::commit_batch_transaction(std::span<const CommitRequest> requests) {
  std::vector<Status> out;
  Status whole = in_transaction([&](Conn& c) -> Status {
    out.clear();
    if (Status s = fault("commit_batch.before_write"); !s.ok()) return s;
    bool first = true;
    EntityChains chains;                     // capabilities().entity_chains
    std::vector<const OutboxEntry*> outbox;  // of the items written, in one statement at the end
    for (const auto& q : requests) {
      if (Status s = chains.check(q); !s.ok()) {
        out.push_back(std::move(s));
        continue;
      }
      Status s = check_commit(q);
      if (s.ok() && q.entity) {
        // The record and the entity write of one item land together or not at all.
        if (Status sp = c.exec("SAVEPOINT idem_item"); !sp.ok()) return sp;
        s = commit_record(c, q);
        if (s.ok()) s = write_entity_in(c, *q.entity);
        const char* end = s.ok() ? "RELEASE SAVEPOINT idem_item" : "ROLLBACK TO SAVEPOINT idem_item";
        if (Status e = c.exec(end); !e.ok()) return e;
        if (!s.ok()) {
          if (Status e = c.exec("RELEASE SAVEPOINT idem_item"); !e.ok()) return e;
        }
      } else if (s.ok()) {
        s = commit_record(c, q);
      }
      const auto code = s.code();
      if (!s.ok() && code != StatusCode::kFailedPrecondition && code != StatusCode::kInvalidArgument &&
          code != StatusCode::kAborted)
        return s;  // an error of the server: nothing of the batch is kept
      chains.note(q, s);
      if (s.ok())
        for (const OutboxEntry& e : q.outbox) outbox.push_back(&e);
      out.push_back(std::move(s));
      if (first && out.back().ok()) {
        first = false;
        if (Status f = fault("commit_batch.after_first"); !f.ok()) return f;
      }
    }
    if (Status s = write_outbox_in(c, outbox); !s.ok()) return s;
    return fault("commit_batch.before_commit");
  });
  if (!whole.ok()) return std::vector<Status>(requests.size(), whole);
  return out;
}

// --- release, extend -------------------------------------------------------------

StatusOr<std::uint32_t> PgStore::release_in(Conn& c, const ReleaseRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  Params p;
  p.bytes(q.id);
  auto r = c.run(sql_.read_row_locked, p);
  if (!r.ok()) return r.status();
  const PGresult* row = r->get();
  const bool has_row = PQntuples(row) == 1;
  const int state = has_row ? get_i16(row, 0, 0) : static_cast<int>(kRowPending);
  const std::int64_t expires = has_row ? get_i64(row, 0, 6) : 0;
  const std::uint32_t retries = has_row ? static_cast<std::uint32_t>(get_i32(row, 0, 5)) : 0;
  if (has_row && state >= kRowCompleted && expires > now) return retries;
  const std::uint32_t before = has_row && state < kRowCompleted && expires > now ? retries : 0;
  const bool leased = has_row && state == kRowInProgress;
  // Another owner's live lease: not ours to give up or to count against.
  if (leased && get_i64(row, 0, 2) > now && get_bytes(row, 0, 1) != q.owner) return before;
  const std::uint32_t after = before + (q.count_retry ? 1 : 0);
  std::optional<std::int64_t> fp;
  if (has_row && !is_null(row, 0, 3)) fp = get_i64(row, 0, 3);
  if (q.count_retry || (leased && before > 0)) {
    // A counted retry is kept until now + retry_ttl; an uncounted one keeps its expiry.
    Params w;
    w.bytes(q.id)
        .i64(fp)
        .i64(static_cast<std::int64_t>(after))
        .i64(q.count_retry ? now + q.retry_ttl.count() : expires);
    if (auto u = c.run(sql_.upsert_pending, w); !u.ok()) return u.status();
  } else if (leased) {
    if (auto d = c.run(sql_.delete_row, p); !d.ok()) return d.status();
  }
  return after;
}

StatusOr<std::uint32_t> PgStore::release(const ReleaseRequest& q) {
  if (Status s = check_release(q); !s.ok()) return s;
  std::uint32_t after = 0;
  Status s = in_transaction([&](Conn& c) -> Status {
    auto r = release_in(c, q);
    if (!r.ok()) return r.status();
    after = *r;
    return ok_status();
  });
  if (!s.ok()) return s;
  return after;
}

Status PgStore::extend(const ExtendRequest& q) {
  if (Status s = check_extend(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.bytes(q.id).bytes(q.owner).i64(now + q.lease.count()).i64(now);
  auto r = (*c)->run(sql_.extend, p);
  if (!r.ok()) return r.status();
  if (changed(r->get()) == 1) return ok_status();
  Params id;
  id.bytes(q.id);
  auto row = (*c)->run(sql_.read_row, id);
  if (!row.ok()) return row.status();
  const PGresult* rr = row->get();
  if (PQntuples(rr) == 1 && get_i16(rr, 0, 0) == kRowInProgress && get_bytes(rr, 0, 1) == q.owner)
    return failed_precondition("extend: the lease expired");
  return failed_precondition("extend: the lease is not held by this owner");
}

// --- inspect, purge --------------------------------------------------------------

StatusOr<std::optional<RecordInfo>> PgStore::inspect(std::string_view id, TimePoint t) {
  const std::int64_t now = to_unix_ms(t);
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.bytes(id);
  auto r = (*c)->run(sql_.read_row, p);
  if (!r.ok()) return r.status();
  const PGresult* row = r->get();
  if (PQntuples(row) != 1) return std::optional<RecordInfo>();
  const int state = get_i16(row, 0, 0);
  const std::int64_t expires = get_i64(row, 0, 6);
  const std::int64_t until = get_i64(row, 0, 2);
  const auto retries = static_cast<std::uint32_t>(get_i32(row, 0, 5));
  RecordInfo info;
  if (!is_null(row, 0, 3)) info.fingerprint = static_cast<std::uint64_t>(get_i64(row, 0, 3));
  if (state == kRowInProgress && until > now) {
    info.state = RecordState::kInProgress;
    info.owner = get_bytes(row, 0, 1);
    info.lease_until = from_unix_ms(until);
    info.retries = expires > now ? retries : 0;
    info.expires_at = from_unix_ms(expires > now ? expires : until);
    return std::optional<RecordInfo>(std::move(info));
  }
  if (expires <= now) return std::optional<RecordInfo>();
  info.state = state == kRowCompleted      ? RecordState::kCompleted
               : state == kRowDeadLettered ? RecordState::kDeadLettered
                                           : RecordState::kPending;
  if (info.state == RecordState::kPending && retries == 0) return std::optional<RecordInfo>();
  info.result = get_opt_bytes(row, 0, 4);
  info.retries = retries;
  info.expires_at = from_unix_ms(expires);
  return std::optional<RecordInfo>(std::move(info));
}

StatusOr<std::size_t> PgStore::purge_expired(TimePoint now, std::size_t max_records) {
  if (max_records == 0) return std::size_t{0};
  // Rows read per record the call may remove, and at least kScanMin: each call does
  // bounded work, and the cursor sweeps the whole table in turn.
  constexpr std::size_t kScanFactor = 4;
  constexpr std::size_t kScanMin = 64;
  const std::size_t max = std::min<std::size_t>(max_records, 1u << 30);
  const std::size_t scan_limit = kScanFactor * max + kScanMin;
  std::optional<std::string> cursor;
  {
    std::lock_guard lock(mu_);
    cursor = purge_cursor_;
  }
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.i64(to_unix_ms(now)).i64(static_cast<std::int64_t>(max)).i64(static_cast<std::int64_t>(scan_limit));
  if (cursor) p.bytes(*cursor);
  auto r = (*c)->run(cursor ? sql_.purge_after : sql_.purge_from, p);
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  const auto removed = static_cast<std::size_t>(get_i64(res, 0, 0));
  const auto scanned = static_cast<std::size_t>(get_i64(res, 0, 1));
  const auto dead = static_cast<std::size_t>(get_i64(res, 0, 2));
  std::optional<std::string> next;
  if (dead >= max) {
    next = get_bytes(res, 0, 3);  // the scan stopped at its max-th expired row
  } else if (scanned >= scan_limit) {
    next = get_bytes(res, 0, 4);
  }  // else: past the last row; the next call starts at the first
  {
    std::lock_guard lock(mu_);
    purge_cursor_ = std::move(next);
  }
  auto sent = purge_outbox(**c, to_unix_ms(now), max - removed);
  if (!sent.ok()) return sent.status();
  return removed + *sent;
}

// --- operator tools --------------------------------------------------------------

StatusOr<TimePoint> PgStore::server_time() {
  auto c = acquire();
  if (!c.ok()) return c.status();
  auto r = (*c)->run(sql_.server_time, Params{});
  if (!r.ok()) return r.status();
  return TimePoint(std::chrono::microseconds(get_i64(r->get(), 0, 0)));
}

StatusOr<RecordCounts> PgStore::count_records(TimePoint now) {
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.i64(to_unix_ms(now));
  auto r = (*c)->run(sql_.count_records, p);
  if (!r.ok()) return r.status();
  RecordCounts n;
  n.in_progress = static_cast<std::size_t>(get_i64(r->get(), 0, 0));
  n.completed = static_cast<std::size_t>(get_i64(r->get(), 0, 1));
  n.dead_lettered = static_cast<std::size_t>(get_i64(r->get(), 0, 2));
  n.pending = static_cast<std::size_t>(get_i64(r->get(), 0, 3));
  n.expired = static_cast<std::size_t>(get_i64(r->get(), 0, 4));
  return n;
}

StatusOr<bool> PgStore::remove_record(std::string_view id, TimePoint now) {
  if (id.empty()) return invalid_argument("remove_record: the id must not be empty");
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.bytes(id).i64(to_unix_ms(now));
  auto r = (*c)->run(sql_.remove_record, p);
  if (!r.ok()) return r.status();
  return PQntuples(r->get()) == 1 && get_bool(r->get(), 0, 0);
}

}  // namespace idem::postgres::detail
