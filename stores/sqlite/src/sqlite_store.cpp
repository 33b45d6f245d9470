// The record operations of the SQLite store: claim, commit, release, extend, inspect,
// their batch forms and purge_expired.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "schema.hpp"
#include "sqlite_store_impl.hpp"

namespace idem::sqlite::detail {
namespace {

constexpr std::string_view kSelectRow =
    "SELECT state, owner, lease_until_ms, fingerprint, result, retries, expires_ms FROM idem_records WHERE id = ?1";
// A done record for an id without a row (the common case with leases=local)...
constexpr std::string_view kInsertDone =
    "INSERT OR IGNORE INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)"
    " VALUES(?1, ?2, NULL, NULL, ?3, ?4, 0, ?5)";
// ... or over an existing row, unless that row is done and unexpired at ?6 = now or
// leased by another owner than ?7 until after now. sqlite3_changes() == 0 tells that
// it refused (or that there is no row).
constexpr std::string_view kUpdateDone =
    "UPDATE idem_records SET state = ?2, owner = NULL, lease_until_ms = NULL, fingerprint = ?3, result = ?4,"
    " retries = 0, expires_ms = ?5"
    " WHERE id = ?1 AND NOT (state >= 2 AND expires_ms > ?6)"
    " AND NOT (state = 1 AND lease_until_ms > ?6 AND owner IS NOT ?7)";
constexpr std::string_view kUpsertPending =
    "INSERT INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)"
    " VALUES(?1, 0, NULL, NULL, ?2, NULL, ?3, ?4)"
    " ON CONFLICT(id) DO UPDATE SET state = 0, owner = NULL, lease_until_ms = NULL,"
    " fingerprint = excluded.fingerprint, result = NULL, retries = excluded.retries, expires_ms = excluded.expires_ms";
constexpr std::string_view kUpsertLease =
    "INSERT INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)"
    " VALUES(?1, 1, ?2, ?3, ?4, NULL, ?5, ?6)"
    " ON CONFLICT(id) DO UPDATE SET state = 1, owner = excluded.owner, lease_until_ms = excluded.lease_until_ms,"
    " fingerprint = excluded.fingerprint, result = NULL, retries = excluded.retries, expires_ms = excluded.expires_ms";
constexpr std::string_view kExtendLease =
    "UPDATE idem_records SET lease_until_ms = ?2,"
    " expires_ms = CASE WHEN retries > 0 THEN expires_ms ELSE ?2 END WHERE id = ?1";
constexpr std::string_view kDeleteRow = "DELETE FROM idem_records WHERE id = ?1";
// The purge scan: up to ?2 rows in id order, each with the time from which it may be
// purged (its expiry; for a shared lease the later of that and the lease's end).
// kScanAfter starts after the cursor ?1, kScanFrom at the first row, kScanUpTo from
// the first row up to and including the cursor ?1 (the wrapped part of a sweep).
constexpr std::string_view kScanAfter =
    "SELECT id, CASE WHEN state = 1 THEN max(expires_ms, lease_until_ms) ELSE expires_ms END FROM idem_records"
    " WHERE id > ?1 ORDER BY id LIMIT ?2";
constexpr std::string_view kScanFrom =
    "SELECT id, CASE WHEN state = 1 THEN max(expires_ms, lease_until_ms) ELSE expires_ms END FROM idem_records"
    " ORDER BY id LIMIT ?2";
constexpr std::string_view kScanUpTo =
    "SELECT id, CASE WHEN state = 1 THEN max(expires_ms, lease_until_ms) ELSE expires_ms END FROM idem_records"
    " WHERE id <= ?1 ORDER BY id LIMIT ?2";

bool is_done_state(int state) { return state == kRowCompleted || state == kRowDeadLettered; }

template <class R>
bool done(const std::optional<R>& row, std::int64_t now) {
  return row && is_done_state(row->state) && row->expires_ms > now;
}

// The retry count that still counts at `now`.
template <class R>
std::uint32_t live_retries(const std::optional<R>& row, std::int64_t now) {
  return row && !is_done_state(row->state) && row->expires_ms > now ? row->retries : 0;
}

}  // namespace

SqliteStore::SqliteStore(sqlite3* db, Options options) : conn_(db), options_(std::move(options)) {}

Status SqliteStore::prepare() {
  std::vector<std::pair<Statement*, std::string_view>> all = {
      {&begin_immediate_, "BEGIN IMMEDIATE"},
      {&begin_read_, "BEGIN"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&savepoint_, "SAVEPOINT idem_op"},
      {&release_savepoint_, "RELEASE idem_op"},
      {&rollback_savepoint_, "ROLLBACK TO idem_op"},
      {&select_row_, kSelectRow},
      {&insert_done_, kInsertDone},
      {&update_done_, kUpdateDone},
      {&upsert_pending_, kUpsertPending},
      {&upsert_lease_, kUpsertLease},
      {&extend_lease_, kExtendLease},
      {&delete_row_, kDeleteRow},
      {&scan_after_, kScanAfter},
      {&scan_from_, kScanFrom},
      {&scan_up_to_, kScanUpTo},
  };
  for (auto& e : entity_statements()) all.push_back(e);
  for (auto& e : outbox_statements()) all.push_back(e);
  for (const auto& [stmt, sql] : all) {
    if (int rc = stmt->prepare(conn_.db, sql); rc != SQLITE_OK) {
      if ((rc & 0xff) == SQLITE_ERROR)
        return data_loss("sqlite: " + options_.path +
                         " has idem tables of a foreign layout: " + sqlite3_errmsg(conn_.db));
      return error(rc, "preparing statements for");
    }
  }
  return ok_status();
}

StoreCapabilities SqliteStore::capabilities() const {
  StoreCapabilities c;
  c.durable = true;
  c.shared = shared();
  c.transactional = true;
  c.batch_transactions = true;
  c.entity_chains = true;
  return c;
}

Status SqliteStore::error(int rc, std::string_view what) const {
  return sqlite_status(rc, conn_.db, what, options_.path);
}

Status SqliteStore::run(const Statement& s, std::string_view what) {
  Use u(s);
  const int rc = u.step();
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? ok_status() : error(rc, what);
}

Status SqliteStore::fault(std::string_view point) const {
  return options_.fault_hook ? options_.fault_hook(point) : ok_status();
}

// --- WriteScope ------------------------------------------------------------------

Status SqliteStore::WriteScope::start() {
  nested_ = sqlite3_get_autocommit(s_.conn_.db) == 0;
  Status st = s_.run(nested_ ? s_.savepoint_ : s_.begin_immediate_, "starting a write transaction on");
  open_ = st.ok();
  return st;
}

Status SqliteStore::WriteScope::finish() {
  Status st = s_.run(nested_ ? s_.release_savepoint_ : s_.commit_, "committing to");
  if (st.ok()) open_ = false;
  return st;
}

SqliteStore::WriteScope::~WriteScope() {
  if (!open_) return;
  if (nested_) {
    (void)s_.run(s_.rollback_savepoint_, "rolling back");
    (void)s_.run(s_.release_savepoint_, "rolling back");
  } else if (sqlite3_get_autocommit(s_.conn_.db) == 0) {
    (void)s_.run(s_.rollback_, "rolling back");
  }
}

// --- reading ---------------------------------------------------------------------

StatusOr<std::optional<SqliteStore::Row>> SqliteStore::read_row(std::string_view id) {
  Use u(select_row_);
  u.blob(1, id);
  const int rc = u.step();
  if (rc == SQLITE_DONE) return std::optional<Row>();
  if (rc != SQLITE_ROW) return error(rc, "reading");
  Row r;
  r.state = static_cast<int>(u.column_i64(0));
  r.owner = u.column_blob(1);
  r.lease_until_ms = u.column_i64(2);
  r.fingerprint = u.column_fingerprint(3);
  if (!u.is_null(4)) r.result = u.column_blob(4);
  r.retries = static_cast<std::uint32_t>(u.column_i64(5));
  r.expires_ms = u.column_i64(6);
  return std::optional<Row>(std::move(r));
}

std::optional<SqliteStore::Lease> SqliteStore::lease_of(std::string_view id, const std::optional<Row>& row) const {
  if (shared()) {
    if (!row || row->state != kRowInProgress) return std::nullopt;
    return Lease{row->owner, row->lease_until_ms, row->fingerprint};
  }
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return it->second;
}

void SqliteStore::forget_lease(std::string_view id) {
  if (shared()) return;
  if (auto it = leases_.find(id); it != leases_.end()) leases_.erase(it);
}

std::size_t SqliteStore::purge_leases(std::int64_t now, std::size_t max) {
  constexpr std::size_t kScanFactor = 4;  // buckets and entries examined per lease to drop
  constexpr std::size_t kScanMin = 64;    // and at least this many
  std::vector<std::string> expired;
  const std::size_t buckets = leases_.bucket_count();
  for (std::size_t budget = kScanFactor * max + kScanMin; budget > 0 && expired.size() < max && !leases_.empty();) {
    const std::size_t b = lease_cursor_++ % buckets;
    --budget;
    for (auto it = leases_.begin(b); it != leases_.end(b) && expired.size() < max && budget > 0; ++it, --budget)
      if (it->second.until_ms <= now) expired.push_back(it->first);
  }
  for (const auto& id : expired) leases_.erase(id);
  return expired.size();
}

// --- claim -----------------------------------------------------------------------

StatusOr<ClaimResult> SqliteStore::claim_one(const ClaimRequest& q,
                                             std::map<std::string, EntityRecord, std::less<>>* seen) {
  const std::int64_t now = to_unix_ms(q.now);
  auto row = read_row(q.id);
  if (!row.ok()) return row.status();
  if (done(*row, now)) {
    const HeldRecord held{(*row)->fingerprint, (*row)->result, (*row)->state == kRowDeadLettered};
    ClaimResult c = *answer_held(q, now, &held, nullptr);
    if (q.check_outbox && c.status == ClaimStatus::kCompleted) {
      auto unsent = has_unsent(q.id);
      if (!unsent.ok()) return unsent.status();
      c.outbox_unsent = *unsent;
    }
    return c;
  }
  const auto lease = lease_of(q.id, *row);
  if (lease && lease->until_ms > now) {
    const HeldLease held{lease->fingerprint, lease->owner, lease->until_ms};
    return *answer_held(q, now, nullptr, &held);
  }
  const std::uint32_t retries = live_retries(*row, now);
  const std::int64_t until = now + q.lease.count();
  ClaimResult granted = ClaimResult::granted(retries);
  if (q.entity_key) {
    const EntityRecord* known = nullptr;
    if (seen != nullptr) {
      if (auto it = seen->find(*q.entity_key); it != seen->end()) known = &it->second;
    }
    if (known != nullptr) {
      granted.entity = *known;
    } else {
      auto entity = read_entity_one(*q.entity_key);
      if (!entity.ok()) return entity.status();
      if (seen != nullptr) seen->emplace(std::string(*q.entity_key), *entity);
      granted.entity = std::move(*entity);
    }
  }
  if (shared()) {
    // The row expires with its retry count if it has one, else with the lease.
    const std::int64_t expires = retries > 0 ? (*row)->expires_ms : until;
    Use u(upsert_lease_);
    u.blob(1, q.id).blob(2, q.owner).i64(3, until).fingerprint(4, q.fingerprint).i64(5, retries).i64(6, expires);
    purge_floor_.written(expires);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "claiming in");
  } else {
    auto [it, inserted] = leases_.try_emplace(std::string(q.id));
    it->second = Lease{std::string(q.owner), until, q.fingerprint};
  }
  return granted;
}

StatusOr<ClaimResult> SqliteStore::claim(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (!shared()) return claim_one(q);
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  auto r = claim_one(q);
  if (!r.ok()) return r;
  if (Status s = w.finish(); !s.ok()) return s;
  return r;
}

// Claims in id order (visit_order): the answers do not depend on the order, but for
// claims of one id, which keep their input order. In key order one transaction's
// b-tree lookups and inserts walk the table's pages in one pass and its dirty pages
// are neighbours (idem_bench_dedup --layouts: 1000 new ids per transaction in input
// order took about 1.2x as long to write as sorted).
std::vector<StatusOr<ClaimResult>> SqliteStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out(requests.size(), StatusOr<ClaimResult>(ClaimResult{}));
  std::lock_guard lock(mu_);
  auto fail_all = [&](const Status& s) {
    out.assign(requests.size(), StatusOr<ClaimResult>(s));
    return out;
  };
  if (shared()) {
    // One write transaction for every claim; an error of SQLite fails them all.
    WriteScope w(*this);
    if (Status s = w.start(); !s.ok()) return fail_all(s);
    std::map<std::string, EntityRecord, std::less<>> seen;
    for (const std::size_t i : visit_order(requests, true)) {
      const auto& q = requests[i];
      if (Status s = check_claim(q); !s.ok()) {
        out[i] = s;
        continue;
      }
      auto r = claim_one(q, &seen);
      if (!r.ok()) return fail_all(r.status());
      out[i] = std::move(r);
    }
    if (Status s = w.finish(); !s.ok()) return fail_all(s);
    return out;
  }
  // Local leases: one read transaction for every row; leases are granted in memory.
  const bool outer = sqlite3_get_autocommit(conn_.db) != 0;
  if (outer) {
    if (Status s = run(begin_read_, "starting a read transaction on"); !s.ok()) return fail_all(s);
  }
  std::map<std::string, EntityRecord, std::less<>> seen;
  for (const std::size_t i : visit_order(requests, true)) {
    const auto& q = requests[i];
    if (Status s = check_claim(q); !s.ok()) {
      out[i] = s;
      continue;
    }
    out[i] = claim_one(q, &seen);
  }
  if (outer && sqlite3_get_autocommit(conn_.db) == 0) (void)run(commit_, "ending a read transaction on");
  return out;
}

// --- commit ----------------------------------------------------------------------

Status SqliteStore::commit_one(const CommitRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  if (!shared()) {
    auto it = leases_.find(q.id);
    if (it != leases_.end() && it->second.until_ms > now && it->second.owner != q.owner)
      return failed_precondition("commit: the lease is held by " + it->second.owner);
  }
  const int state = q.outcome == Outcome::kDeadLettered ? kRowDeadLettered : kRowCompleted;
  const std::int64_t expires = now + q.ttl.count();
  purge_floor_.written(expires);
  // Leases in the file mean a row usually exists: try the update first there.
  for (const bool insert : shared() ? std::array{false, true} : std::array{true, false}) {
    Use u(insert ? insert_done_ : update_done_);
    u.blob(1, q.id).i64(2, state).fingerprint(3, q.fingerprint).blob(4, q.result).i64(5, expires);
    if (!insert) u.i64(6, now).blob(7, q.owner);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "committing to");
    if (sqlite3_changes(conn_.db) > 0) return ok_status();
  }
  auto row = read_row(q.id);
  if (!row.ok()) return row.status();
  if (done(*row, now)) return failed_precondition("commit: the id is already completed");
  if (*row && (*row)->state == kRowInProgress)
    return failed_precondition("commit: the lease is held by " + (*row)->owner);
  return internal_error("commit: the record was not written");
}

Status SqliteStore::commit_with_entity(const CommitRequest& q) {
  if (Status s = fault("commit.before_write"); !s.ok()) return s;
  if (Status s = commit_one(q); !s.ok()) return s;
  if (Status s = write_outbox(q); !s.ok()) return s;
  if (Status s = fault("commit.after_record"); !s.ok()) return s;
  if (!q.entity) return ok_status();
  if (Status s = write_entity_one(*q.entity); !s.ok()) return s;
  return fault("commit.after_entity");
}

Status SqliteStore::commit(const CommitRequest& q) {
  if (Status s = check_commit(q); !s.ok()) return s;
  std::lock_guard lock(mu_);
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  if (Status s = commit_with_entity(q); !s.ok()) return s;
  if (Status s = w.finish(); !s.ok()) return s;
  forget_lease(q.id);
  return ok_status();
}

// Writes in id order (visit_order) when no request writes an entity or outbox entries,
// whose order matters; else in input order.
std::vector<Status> SqliteStore::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> out(requests.size());
  auto fail_all = [&](const Status& s) { return std::vector<Status>(requests.size(), s); };
  std::lock_guard lock(mu_);
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return fail_all(s);
  if (Status s = fault("commit_batch.before_write"); !s.ok()) return fail_all(s);
  bool first = true;
  EntityStaging staged;
  EntityChains chains;  // capabilities().entity_chains
  for (const std::size_t i : visit_order(requests, reorderable(requests))) {
    const auto& q = requests[i];
    if (Status s = chains.check(q); !s.ok()) {
      out[i] = std::move(s);
      continue;
    }
    Status s = check_commit(q);
    if (s.ok() && q.entity) {
      // The record and the entity write of one item land together or not at all: the
      // revision is checked before anything of the item is written, and nothing else
      // can write between the check and the write (one write transaction, mu_ held).
      s = check_staged_revision(*q.entity, staged);
      if (s.ok()) s = commit_one(q);
      if (s.ok()) {
        s = stage_entity_write(*q.entity, staged);
        if (!s.ok()) return fail_all(s);
      }
    } else if (s.ok()) {
      s = commit_one(q);
    }
    if (s.ok() && !q.outbox.empty()) {
      if (Status o = write_outbox(q); !o.ok()) return fail_all(o);
    }
    const auto code = s.code();
    if (!s.ok() && code != StatusCode::kFailedPrecondition && code != StatusCode::kInvalidArgument &&
        code != StatusCode::kAborted)
      return fail_all(s);  // an error of SQLite: nothing of the batch is kept
    chains.note(q, s);
    out[i] = std::move(s);
    if (first && out[i].ok()) {
      first = false;
      if (Status f = fault("commit_batch.after_first"); !f.ok()) return fail_all(f);
    }
  }
  if (Status s = write_staged(staged); !s.ok()) return fail_all(s);
  if (Status s = fault("commit_batch.before_commit"); !s.ok()) return fail_all(s);
  if (Status s = w.finish(); !s.ok()) return fail_all(s);
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (out[i].ok()) forget_lease(requests[i].id);
  return out;
}

// --- release, extend -------------------------------------------------------------

Status SqliteStore::write_pending(std::string_view id, std::uint32_t retries, std::int64_t expires_ms,
                                  const std::optional<std::uint64_t>& fingerprint) {
  Use u(upsert_pending_);
  u.blob(1, id).fingerprint(2, fingerprint).i64(3, retries).i64(4, expires_ms);
  purge_floor_.written(expires_ms);
  const int rc = u.step();
  return rc == SQLITE_DONE ? ok_status() : error(rc, "recording a retry in");
}

StatusOr<std::uint32_t> SqliteStore::release_one(const ReleaseRequest& q, bool& drop_lease) {
  const std::int64_t now = to_unix_ms(q.now);
  auto row_or = read_row(q.id);
  if (!row_or.ok()) return row_or.status();
  const auto& row = *row_or;
  if (done(row, now)) return row->retries;
  const std::uint32_t before = live_retries(row, now);
  const auto lease = lease_of(q.id, row);
  // Another owner's live lease: not ours to give up or to count against.
  if (lease && lease->until_ms > now && lease->owner != q.owner) return before;
  // The caller's lease (live or expired) or anyone's expired lease is given up.
  drop_lease = lease.has_value();
  const std::uint32_t after = before + (q.count_retry ? 1 : 0);
  const auto fp = lease ? lease->fingerprint : row ? row->fingerprint : std::nullopt;
  if (q.count_retry || (drop_lease && before > 0)) {
    // A counted retry is kept until now + retry_ttl; an uncounted one keeps its expiry.
    const std::int64_t expires = q.count_retry ? now + q.retry_ttl.count() : row->expires_ms;
    if (Status s = write_pending(q.id, after, expires, fp); !s.ok()) return s;
  } else if (shared() && drop_lease) {
    Use u(delete_row_);
    u.blob(1, q.id);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "releasing in");
  }
  return after;
}

StatusOr<std::uint32_t> SqliteStore::release(const ReleaseRequest& q) {
  if (Status s = check_release(q); !s.ok()) return s;
  std::lock_guard lock(mu_);
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  bool drop_lease = false;
  auto r = release_one(q, drop_lease);
  if (!r.ok()) return r;
  if (Status s = w.finish(); !s.ok()) return s;
  if (drop_lease) forget_lease(q.id);
  return r;
}

Status SqliteStore::extend(const ExtendRequest& q) {
  if (Status s = check_extend(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  const std::int64_t until = now + q.lease.count();
  std::lock_guard lock(mu_);
  if (!shared()) {
    auto it = leases_.find(q.id);
    if (it == leases_.end() || it->second.owner != q.owner)
      return failed_precondition("extend: the lease is not held by this owner");
    if (it->second.until_ms <= now) return failed_precondition("extend: the lease expired");
    it->second.until_ms = until;
    return ok_status();
  }
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  auto row = read_row(q.id);
  if (!row.ok()) return row.status();
  if (!*row || (*row)->state != kRowInProgress || (*row)->owner != q.owner)
    return failed_precondition("extend: the lease is not held by this owner");
  if ((*row)->lease_until_ms <= now) return failed_precondition("extend: the lease expired");
  {
    Use u(extend_lease_);
    u.blob(1, q.id).i64(2, until);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "extending a lease in");
  }
  return w.finish();
}

// --- inspect, purge --------------------------------------------------------------

StatusOr<std::optional<RecordInfo>> SqliteStore::inspect(std::string_view id, TimePoint t) {
  const std::int64_t now = to_unix_ms(t);
  std::lock_guard lock(mu_);
  auto row_or = read_row(id);
  if (!row_or.ok()) return row_or.status();
  const auto& row = *row_or;
  const auto lease = lease_of(id, row);
  RecordInfo info;
  if (!done(row, now) && lease && lease->until_ms > now) {
    info.state = RecordState::kInProgress;
    info.owner = lease->owner;
    info.lease_until = from_unix_ms(lease->until_ms);
    info.fingerprint = lease->fingerprint;
    info.retries = live_retries(row, now);
    info.expires_at = from_unix_ms(row && row->expires_ms > now ? row->expires_ms : lease->until_ms);
    return std::optional<RecordInfo>(std::move(info));
  }
  if (!row || row->expires_ms <= now) return std::optional<RecordInfo>();
  info.state = row->state == kRowCompleted      ? RecordState::kCompleted
               : row->state == kRowDeadLettered ? RecordState::kDeadLettered
                                                : RecordState::kPending;
  if (info.state == RecordState::kPending && row->retries == 0) return std::optional<RecordInfo>();
  // An expired lease taken after the row was written holds the newer fingerprint.
  info.fingerprint = lease && !is_done_state(row->state) ? lease->fingerprint : row->fingerprint;
  info.result = row->result;
  info.retries = row->retries;
  info.expires_at = from_unix_ms(row->expires_ms);
  return std::optional<RecordInfo>(std::move(info));
}

StatusOr<std::size_t> SqliteStore::purge_rows(std::int64_t now, std::size_t max, std::size_t scan_limit,
                                              std::optional<std::string>& next_cursor, PurgeFloor& floor) {
  std::vector<std::string> expired;
  std::optional<std::string> last;  // the last row read
  std::size_t scanned = 0;
  // Reads the rows of `s` in id order until max are expired or scan_limit rows are
  // read. Returns whether it read its whole range (for `to_end`, the last row: the
  // pass is over).
  auto scan = [&](const Statement& s, bool to_end) -> StatusOr<bool> {
    Use u(s);
    u.blob(1, purge_cursor_ ? std::optional<std::string_view>(*purge_cursor_) : std::nullopt);
    const std::size_t limit = scan_limit - scanned;
    u.i64(2, static_cast<std::int64_t>(limit));
    std::size_t read = 0;
    int rc = SQLITE_DONE;
    while (expired.size() < max && (rc = u.step()) == SQLITE_ROW) {
      ++read;
      last = u.column_blob(0);
      const std::int64_t purgeable_at = u.column_i64(1);
      if (purgeable_at <= now) {
        expired.push_back(*last);
      } else {
        floor.pass_min = std::min(floor.pass_min, purgeable_at);
      }
    }
    scanned += read;
    if (expired.size() >= max) return false;
    if (rc != SQLITE_DONE) return error(rc, "scanning for expired records in");
    if (read < limit && to_end) floor.end_pass();
    return read < limit;
  };
  // One sweep goes from the cursor to the last row, then wraps to the first row and
  // goes up to the cursor.
  StatusOr<bool> swept = scan(purge_cursor_ ? scan_after_ : scan_from_, true);
  if (swept.ok() && *swept && purge_cursor_) swept = scan(scan_up_to_, false);
  if (!swept.ok()) return swept.status();
  for (const auto& id : expired) {
    Use u(delete_row_);
    u.blob(1, std::string_view(id));
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "purging");
  }
  // After a whole table, the next call starts at the first row; else after the last read.
  next_cursor = *swept ? std::nullopt : std::move(last);
  return expired.size();
}

StatusOr<std::size_t> SqliteStore::purge_expired(TimePoint now, std::size_t max_records) {
  if (max_records == 0) return std::size_t{0};
  const std::int64_t now_ms = to_unix_ms(now);
  // Rows read per record the call may remove. With the consumer's defaults (a purge of
  // 1024 every 1000 commits) the sweep reads ~4.2 rows per commit, so the expired rows
  // waiting for it stay below a third of the live ones (x <= (1 + x) / 4.2); at 8
  // (x <= 0.14) the scan took a fifth of a SQLite batch consumer's time
  // (idem_bench_ordering, the _b rows).
  constexpr std::size_t kScanFactor = 4;
  constexpr std::size_t kScanMin = 64;  // and at least this many
  constexpr std::size_t kScanMax = static_cast<std::size_t>(INT64_MAX);
  const std::size_t scan_limit =
      max_records > (kScanMax - kScanMin) / kScanFactor ? kScanMax : kScanFactor * max_records + kScanMin;
  // A call before the floor has nothing of this process's to purge and reads nothing,
  // but every kSweepEvery-th, which goes on with the pass for rows other processes
  // wrote to the same file.
  constexpr std::size_t kSweepEvery = 16;
  std::lock_guard lock(mu_);
  if (now_ms < purge_floor_.floor && ++purge_floor_.skipped < kSweepEvery) {
    // Expired local leases are records too (an abandoned claim).
    return shared() ? 0 : purge_leases(now_ms, max_records);
  }
  purge_floor_.skipped = 0;
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  std::optional<std::string> next_cursor;
  PurgeFloor floor = purge_floor_;
  auto rows = purge_rows(now_ms, max_records, scan_limit, next_cursor, floor);
  if (!rows.ok()) return rows.status();
  if (Status s = w.finish(); !s.ok()) return s;
  purge_cursor_ = std::move(next_cursor);
  purge_floor_ = floor;
  std::size_t removed = *rows;
  if (!shared() && removed < max_records) removed += purge_leases(now_ms, max_records - removed);
  return removed;
}

}  // namespace idem::sqlite::detail
