#include "conformance/store_conformance.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <map>
#include <thread>

namespace idem::conformance {

using std::chrono::milliseconds;
using namespace std::string_literals;
using namespace std::string_view_literals;

void PrintTo(const StoreFactory& f, std::ostream* os) { *os << f.name; }

std::string factory_name(const ::testing::TestParamInfo<StoreFactory>& info) { return info.param.name; }

// --- FaultSwitch ------------------------------------------------------------------

FaultHook FaultSwitch::hook() {
  return [this](std::string_view point) -> Status {
    std::lock_guard lock(mu_);
    std::string p(point);
    if (std::find(seen_.begin(), seen_.end(), p) == seen_.end()) seen_.push_back(p);
    if (!fail_at_.empty() && p == fail_at_) return unavailable("fault injected at " + p);
    return ok_status();
  };
}

void FaultSwitch::fail_at(std::string point) {
  std::lock_guard lock(mu_);
  fail_at_ = std::move(point);
}

std::vector<std::string> FaultSwitch::seen() const {
  std::lock_guard lock(mu_);
  return seen_;
}

void FaultSwitch::clear_seen() {
  std::lock_guard lock(mu_);
  seen_.clear();
}

// --- fixture ----------------------------------------------------------------------

void StoreConformance::SetUp() {
  location_ = GetParam().new_location();
  ASSERT_NE(location_, nullptr);
  auto s = location_->open(faults_.hook());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  store_ = std::move(s).value();
}

void StoreConformance::TearDown() {
  store_.reset();
  location_.reset();
}

void StoreConformance::reopen() {
  store_.reset();  // close first: a store may lock its location exclusively
  auto s = location_->open(faults_.hook());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  store_ = std::move(s).value();
}

std::shared_ptr<Store> StoreConformance::open_second() {
  auto s = location_->open(faults_.hook());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

ClaimRequest StoreConformance::claim_req(std::string_view id, std::string_view owner, TimePoint now,
                                         std::optional<std::uint64_t> fp) const {
  return ClaimRequest{id, owner, kLease, fp, now, std::nullopt};
}

CommitRequest StoreConformance::commit_req(std::string_view id, std::string_view owner, TimePoint now,
                                           std::optional<std::string_view> result, Outcome outcome) const {
  CommitRequest c;
  c.id = id;
  c.owner = owner;
  c.now = now;
  c.ttl = kTtl;
  c.result = result;
  c.outcome = outcome;
  return c;
}

ReleaseRequest StoreConformance::release_req(std::string_view id, std::string_view owner, TimePoint now,
                                             bool count_retry) const {
  return ReleaseRequest{id, owner, count_retry, now, kRetryTtl, std::nullopt};
}

ClaimResult StoreConformance::claim_ok(const ClaimRequest& r) {
  auto c = store_->claim(r);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : ClaimResult::conflict();
}

bool StoreConformance::claim_new(std::string_view id, std::string_view owner, TimePoint now,
                                 std::optional<std::uint64_t> fp, std::optional<std::string_view> entity_key) {
  ClaimRequest q = claim_req(id, owner, now, fp);
  q.entity_key = entity_key;
  ClaimResult c = claim_ok(q);
  if (caps().probabilistic && c.status == ClaimStatus::kCompleted) return false;
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 0u);
  return c.status == ClaimStatus::kNew;
}

StatusOr<std::optional<RecordInfo>> StoreConformance::inspect(std::string_view id, TimePoint now,
                                                              std::optional<std::string_view> entity_key) {
  return GetParam().inspect ? GetParam().inspect(*store_, id, entity_key, now) : store_->inspect(id, now);
}

RecordInfo StoreConformance::inspect_live(std::string_view id, TimePoint now,
                                          std::optional<std::string_view> entity_key) {
  auto r = inspect(id, now, entity_key);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok() || !r->has_value()) {
    ADD_FAILURE() << "no live record for id of " << id.size() << " bytes";
    return {};
  }
  return **r;
}

namespace {

std::optional<RecordInfo> inspect_or_die(Store& s, std::string_view id, TimePoint now) {
  auto r = s.inspect(id, now);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::nullopt;
}

}  // namespace

// --- capabilities -----------------------------------------------------------------

TEST_P(StoreConformance, CapabilitiesMatchWhatTheFactoryPromises) {
  const StoreCapabilities c = store().capabilities();
  EXPECT_EQ(c.durable, caps().durable);
  EXPECT_EQ(c.shared, caps().shared);
  EXPECT_EQ(c.probabilistic, caps().probabilistic);
  EXPECT_EQ(store().entities() != nullptr, caps().entities);
  EXPECT_EQ(c.combined_commit_claim, caps().combined_commit_claim);
  EXPECT_EQ(c.false_positive_rate, caps().false_positive_rate) << "the store states its rate";
  if (!caps().probabilistic) {
    EXPECT_EQ(caps().false_positive_rate, 0.0);
  }
  if (!caps().fault_hook) {
    EXPECT_FALSE(caps().no_fault_hook_reason.empty()) << "say why there is no fault hook";
  }
  if (caps().membership_only) {
    EXPECT_TRUE(caps().probabilistic) << "membership_only is a probabilistic store's departure";
  }
  if (caps().fixed_retention.count() > 0) {
    EXPECT_EQ(caps().fixed_retention, kTtl) << "the suite's ttl must equal the fixed retention";
  }
}

// --- claim ------------------------------------------------------------------------

TEST_P(StoreConformance, FirstClaimIsNewThenInProgressForEveryone) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m1", "A", t0));

  ClaimResult other = claim_ok(claim_req("m1", "B", t0 + milliseconds(3000)));
  EXPECT_EQ(other.status, ClaimStatus::kInProgress);
  EXPECT_EQ(other.owner, "A");
  EXPECT_EQ(other.lease_left, kLease - milliseconds(3000));

  ClaimResult self = claim_ok(claim_req("m1", "A", t0 + milliseconds(4000)));
  EXPECT_EQ(self.status, ClaimStatus::kInProgress) << "a second claim by the holder does not renew the lease";
  EXPECT_EQ(self.owner, "A");
  EXPECT_EQ(self.lease_left, kLease - milliseconds(4000));

  // Other ids are unaffected.
  EXPECT_TRUE(claim_new("m2", "B", t0));
}

TEST_P(StoreConformance, DuplicateOfCompletedIdReturnsStoredResult) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("with-result", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("with-result", "A", t0, "the result\0bytes"sv)).ok());
  ASSERT_TRUE(claim_new("no-result", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("no-result", "A", t0)).ok());

  ClaimResult d = claim_ok(claim_req("with-result", "B", t0 + milliseconds(1)));
  EXPECT_EQ(d.status, ClaimStatus::kCompleted);
  EXPECT_EQ(d.result, stored("the result\0bytes"s));
  EXPECT_FALSE(d.dead_lettered);
  EXPECT_FALSE(d.outbox_unsent) << "committed without outgoing messages";

  ClaimResult n = claim_ok(claim_req("no-result", "A", t0 + milliseconds(1)));
  EXPECT_EQ(n.status, ClaimStatus::kCompleted);
  EXPECT_FALSE(n.result.has_value());
  EXPECT_FALSE(n.dead_lettered);
}

TEST_P(StoreConformance, LargeResultRoundTrips) {
  const TimePoint t0 = clock_.now();
  std::string big(64 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(claim_new("big", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("big", "A", t0, big)).ok());
  ClaimResult d = claim_ok(claim_req("big", "B", t0));
  ASSERT_EQ(d.status, ClaimStatus::kCompleted);
  EXPECT_EQ(d.result, stored(big));
}

TEST_P(StoreConformance, CommitOfCompletedIdFails) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("m", "A", t0, "first"sv)).ok());
  Status again = store().commit(commit_req("m", "A", t0 + milliseconds(1), "second"sv));
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.to_string();
  ClaimResult d = claim_ok(claim_req("m", "A", t0 + milliseconds(2)));
  EXPECT_EQ(d.result, stored("first")) << "a rejected commit must not overwrite the stored result";
}

TEST_P(StoreConformance, ConflictOnlyForDifferentFingerprints) {
  const TimePoint t0 = clock_.now();
  // In progress.
  ASSERT_TRUE(claim_new("fp", "A", t0, 111));
  EXPECT_EQ(claim_ok(claim_req("fp", "B", t0, 222)).status, ClaimStatus::kConflict);
  EXPECT_EQ(claim_ok(claim_req("fp", "B", t0, 111)).status, ClaimStatus::kInProgress);
  EXPECT_EQ(claim_ok(claim_req("fp", "B", t0, std::nullopt)).status, ClaimStatus::kInProgress);

  // Completed.
  CommitRequest c = commit_req("fp", "A", t0, "r"sv);
  c.fingerprint = 111;
  ASSERT_TRUE(store().commit(c).ok());
  EXPECT_EQ(claim_ok(claim_req("fp", "B", t0, 222)).status, completed_conflict());
  ClaimResult same = claim_ok(claim_req("fp", "B", t0, 111));
  EXPECT_EQ(same.status, ClaimStatus::kCompleted);
  EXPECT_EQ(same.result, stored("r"));
  EXPECT_EQ(claim_ok(claim_req("fp", "B", t0, std::nullopt)).status, ClaimStatus::kCompleted);

  // A record without a fingerprint never conflicts.
  ASSERT_TRUE(claim_new("nofp", "A", t0, std::nullopt));
  EXPECT_EQ(claim_ok(claim_req("nofp", "B", t0, 333)).status, ClaimStatus::kInProgress);
  ASSERT_TRUE(store().commit(commit_req("nofp", "A", t0)).ok());
  EXPECT_EQ(claim_ok(claim_req("nofp", "B", t0, 333)).status, ClaimStatus::kCompleted);
  EXPECT_EQ(claim_ok(claim_req("nofp", "B", t0, std::nullopt)).status, ClaimStatus::kCompleted);
}

TEST_P(StoreConformance, ConflictIsForgottenWithTheRecord) {
  const TimePoint t0 = clock_.now();
  CommitRequest c = commit_req("fp", "A", t0);
  c.fingerprint = 1;
  ASSERT_TRUE(claim_new("fp", "A", t0, 1));
  ASSERT_TRUE(store().commit(c).ok());
  const TimePoint later = t0 + kTtl + milliseconds(1);
  EXPECT_TRUE(claim_new("fp", "B", later, 2)) << "an expired record counts as absent";
}

// --- leases -----------------------------------------------------------------------

TEST_P(StoreConformance, ExpiredLeaseIsTakenOverByAnotherOwner) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  clock_.set(t0 + kLease - milliseconds(1));
  ClaimResult before = claim_ok(claim_req("m", "B", clock_.now()));
  EXPECT_EQ(before.status, ClaimStatus::kInProgress);
  EXPECT_EQ(before.lease_left, milliseconds(1));

  clock_.set(t0 + kLease + milliseconds(1));
  ClaimResult after = claim_ok(claim_req("m", "B", clock_.now()));
  EXPECT_EQ(after.status, ClaimStatus::kNew);
  EXPECT_EQ(after.retries, 0u);

  RecordInfo info = inspect_live("m", clock_.now());
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.owner, "B");
  ClaimResult a = claim_ok(claim_req("m", "A", clock_.now()));
  EXPECT_EQ(a.status, ClaimStatus::kInProgress);
  EXPECT_EQ(a.owner, "B");
}

TEST_P(StoreConformance, CommitRejectedWhileAnotherOwnerHoldsTheLease) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  Status foreign = store().commit(commit_req("m", "B", t0 + milliseconds(1)));
  EXPECT_EQ(foreign.code(), StatusCode::kFailedPrecondition) << foreign.to_string();

  const TimePoint t1 = t0 + kLease + milliseconds(1);
  ASSERT_TRUE(claim_new("m", "B", t1));
  Status stale = store().commit(commit_req("m", "A", t1 + milliseconds(1), "from A"sv));
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale.to_string();
  RecordInfo info = inspect_live("m", t1 + milliseconds(1));
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.owner, "B");

  ASSERT_TRUE(store().commit(commit_req("m", "B", t1 + milliseconds(2), "from B"sv)).ok());
  ClaimResult d = claim_ok(claim_req("m", "A", t1 + milliseconds(3)));
  EXPECT_EQ(d.status, ClaimStatus::kCompleted);
  EXPECT_EQ(d.result, stored("from B"));
}

TEST_P(StoreConformance, CommitAcceptedOnOwnExpiredLease) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  const TimePoint late = t0 + kLease + milliseconds(5000);
  ASSERT_TRUE(store().commit(commit_req("m", "A", late, "late"sv)).ok());
  ClaimResult d = claim_ok(claim_req("m", "B", late + milliseconds(1)));
  EXPECT_EQ(d.status, ClaimStatus::kCompleted);
  EXPECT_EQ(d.result, stored("late"));
}

TEST_P(StoreConformance, ExtendOwnForeignAndExpired) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  const TimePoint t1 = t0 + milliseconds(8000);
  ASSERT_TRUE(store().extend({"m", "A", milliseconds(20'000), t1, std::nullopt}).ok());
  // Past the original expiry, the lease still holds.
  ClaimResult c = claim_ok(claim_req("m", "B", t0 + kLease + milliseconds(1)));
  EXPECT_EQ(c.status, ClaimStatus::kInProgress);
  EXPECT_EQ(c.owner, "A");
  EXPECT_EQ(c.lease_left, (t1 + milliseconds(20'000)) - (t0 + kLease + milliseconds(1)));
  EXPECT_EQ(inspect_live("m", t1).lease_until, t1 + milliseconds(20'000));

  Status foreign = store().extend({"m", "B", milliseconds(60'000), t1, std::nullopt});
  EXPECT_EQ(foreign.code(), StatusCode::kFailedPrecondition) << foreign.to_string();
  EXPECT_EQ(inspect_live("m", t1).lease_until, t1 + milliseconds(20'000)) << "a foreign extend changes nothing";

  const TimePoint expired = t1 + milliseconds(20'001);
  Status late = store().extend({"m", "A", milliseconds(60'000), expired, std::nullopt});
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition) << late.to_string();
  EXPECT_TRUE(claim_new("m", "B", expired)) << "a refused extend must not revive the lease";

  Status unknown = store().extend({"never-claimed", "A", kLease, t0, std::nullopt});
  EXPECT_EQ(unknown.code(), StatusCode::kFailedPrecondition) << unknown.to_string();

  ASSERT_TRUE(claim_new("done", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("done", "A", t0)).ok());
  Status completed = store().extend({"done", "A", kLease, t0 + milliseconds(1), std::nullopt});
  EXPECT_EQ(completed.code(), StatusCode::kFailedPrecondition) << completed.to_string();
}

// --- release and retry counts ------------------------------------------------------

TEST_P(StoreConformance, ReleaseOwnLeaseLetsOthersClaim) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  auto r = store().release(release_req("m", "A", t0 + milliseconds(1), false));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, 0u);
  ClaimResult c = claim_ok(claim_req("m", "B", t0 + milliseconds(2)));
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 0u);
}

TEST_P(StoreConformance, ReleaseByAnotherOwnerIsANoOp) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  for (bool count : {false, true}) {
    auto r = store().release(release_req("m", "B", t0 + milliseconds(1), count));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, 0u) << "count_retry=" << count;
  }
  ClaimResult c = claim_ok(claim_req("m", "B", t0 + milliseconds(2)));
  EXPECT_EQ(c.status, ClaimStatus::kInProgress);
  EXPECT_EQ(c.owner, "A");
  RecordInfo info = inspect_live("m", t0 + milliseconds(2));
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.retries, 0u);

  // Nor does a release touch a completed record.
  ASSERT_TRUE(store().commit(commit_req("m", "A", t0 + milliseconds(3), "r"sv)).ok());
  auto r = store().release(release_req("m", "A", t0 + milliseconds(4), true));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
  EXPECT_EQ(claim_ok(claim_req("m", "B", t0 + milliseconds(5))).status, ClaimStatus::kCompleted);
}

TEST_P(StoreConformance, RetryCountSurvivesReleaseClaimCycles) {
  TimePoint t = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t));
  for (std::uint32_t k = 1; k <= 4; ++k) {
    auto r = store().release(release_req("m", k % 2 ? "A" : "B", t, true));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, k);
    RecordInfo pending = inspect_live("m", t);
    EXPECT_EQ(pending.state, RecordState::kPending);
    EXPECT_EQ(pending.retries, k);
    EXPECT_EQ(pending.expires_at, t + kRetryTtl);
    t += milliseconds(1000);
    // Alternate owners: the count belongs to the id, not to the owner.
    ClaimResult c = claim_ok(claim_req("m", k % 2 ? "B" : "A", t));
    EXPECT_EQ(c.status, ClaimStatus::kNew);
    EXPECT_EQ(c.retries, k);
    EXPECT_EQ(inspect_live("m", t).retries, k);
  }
  // A release without count_retry keeps the count.
  auto r = store().release(release_req("m", "A", t, false));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4u);
  EXPECT_EQ(claim_ok(claim_req("m", "A", t)).retries, 4u);
}

TEST_P(StoreConformance, CommitClearsTheRetryCount) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  ASSERT_TRUE(store().release(release_req("m", "A", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("m", "A", t0)).retries, 1u);
  ASSERT_TRUE(store().release(release_req("m", "A", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("m", "A", t0)).retries, 2u);
  ASSERT_TRUE(store().commit(commit_req("m", "A", t0)).ok());
  RecordInfo info = inspect_live("m", t0);
  EXPECT_EQ(info.state, RecordState::kCompleted);
  EXPECT_EQ(info.retries, 0u);
  // Once the record expires the id starts from zero.
  ClaimResult c = claim_ok(claim_req("m", "A", t0 + kTtl + milliseconds(1)));
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 0u);
}

TEST_P(StoreConformance, RetryCountExpiresAfterRetryTtl) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("pending", "A", t0));
  ASSERT_TRUE(store().release(release_req("pending", "A", t0, true)).ok());
  EXPECT_EQ(inspect_live("pending", t0 + kRetryTtl - milliseconds(1)).retries, 1u);
  EXPECT_EQ(inspect_or_die(store(), "pending", t0 + kRetryTtl + milliseconds(1)), std::nullopt);
  ClaimResult c = claim_ok(claim_req("pending", "A", t0 + kRetryTtl + milliseconds(1)));
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 0u);

  // The same when the count was picked up by a claim whose lease then expired.
  ASSERT_TRUE(claim_new("reclaimed", "A", t0));
  ASSERT_TRUE(store().release(release_req("reclaimed", "A", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("reclaimed", "B", t0 + milliseconds(1000))).retries, 1u);
  // B crashes: its lease runs out, then the retry count's ttl does.
  const TimePoint late = t0 + kRetryTtl + milliseconds(1);
  EXPECT_EQ(inspect_or_die(store(), "reclaimed", late), std::nullopt);
  ClaimResult again = claim_ok(claim_req("reclaimed", "C", late));
  EXPECT_EQ(again.status, ClaimStatus::kNew);
  EXPECT_EQ(again.retries, 0u);
}

TEST_P(StoreConformance, DeadLetteredCommitAnswersCompleted) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("dl", "A", t0));
  ASSERT_TRUE(store().release(release_req("dl", "A", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("dl", "A", t0)).retries, 1u);
  ASSERT_TRUE(store().commit(commit_req("dl", "A", t0, std::nullopt, Outcome::kDeadLettered)).ok());
  ClaimResult c = claim_ok(claim_req("dl", "B", t0 + milliseconds(1)));
  EXPECT_EQ(c.status, ClaimStatus::kCompleted);
  EXPECT_EQ(c.dead_lettered, !caps().membership_only);
  RecordInfo info = inspect_live("dl", t0 + milliseconds(1));
  EXPECT_EQ(info.state, caps().membership_only ? RecordState::kCompleted : RecordState::kDeadLettered);
  EXPECT_EQ(info.retries, 0u);
  EXPECT_EQ(info.expires_at, t0 + kTtl);
  EXPECT_TRUE(claim_new("dl", "B", t0 + kTtl + milliseconds(1)));
}

TEST_P(StoreConformance, CompletedRecordExpiresAfterTtl) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("m", "A", t0, "r"sv)).ok());
  EXPECT_EQ(claim_ok(claim_req("m", "B", t0 + kTtl - milliseconds(1))).status, ClaimStatus::kCompleted);
  EXPECT_EQ(inspect_or_die(store(), "m", t0 + kTtl + milliseconds(1)), std::nullopt);
  ClaimResult c = claim_ok(claim_req("m", "B", t0 + kTtl + milliseconds(1)));
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 0u);
  EXPECT_FALSE(c.result.has_value());
}

TEST_P(StoreConformance, CountedReleaseOfAnExpiredRecordStartsAFreshCount) {
  if (caps().membership_only) {
    // A membership-only store keeps no retry counts next to done ids; its retry
    // counts are checked by the retry tests above.
    EXPECT_TRUE(caps().probabilistic);
    return;
  }
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("old", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("old", "A", t0, "r"sv)).ok());
  // Long after the record expired, a failed attempt is counted against the id...
  const TimePoint late = t0 + kTtl + milliseconds(10);
  auto retries = store().release(release_req("old", "B", late, true));
  ASSERT_TRUE(retries.ok());
  EXPECT_EQ(*retries, 1u);
  // ...and the id is new again, with that one retry and without the old result.
  ClaimResult c = claim_ok(claim_req("old", "C", late + milliseconds(10)));
  EXPECT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_EQ(c.retries, 1u);
  EXPECT_FALSE(c.result.has_value());
  EXPECT_TRUE(store().commit(commit_req("old", "C", late + milliseconds(20))).ok());
}

// --- inspect ----------------------------------------------------------------------

TEST_P(StoreConformance, InspectShowsEachState) {
  const TimePoint t0 = clock_.now();
  EXPECT_EQ(inspect_or_die(store(), "unknown", t0), std::nullopt);

  ASSERT_TRUE(claim_new("m", "A", t0, 42));
  RecordInfo leased = inspect_live("m", t0 + milliseconds(1));
  EXPECT_EQ(leased.state, RecordState::kInProgress);
  EXPECT_EQ(leased.owner, "A");
  EXPECT_EQ(leased.lease_until, t0 + kLease);
  EXPECT_EQ(leased.fingerprint, std::optional<std::uint64_t>(42));
  EXPECT_EQ(leased.retries, 0u);

  ASSERT_TRUE(store().release(release_req("m", "A", t0 + milliseconds(2), true)).ok());
  RecordInfo pending = inspect_live("m", t0 + milliseconds(3));
  EXPECT_EQ(pending.state, RecordState::kPending);
  EXPECT_EQ(pending.retries, 1u);
  EXPECT_EQ(pending.expires_at, t0 + milliseconds(2) + kRetryTtl);

  ASSERT_EQ(claim_ok(claim_req("m", "A", t0 + milliseconds(4), 42)).status, ClaimStatus::kNew);
  CommitRequest c = commit_req("m", "A", t0 + milliseconds(5), "res"sv);
  c.fingerprint = 42;
  ASSERT_TRUE(store().commit(c).ok());
  RecordInfo done = inspect_live("m", t0 + milliseconds(6));
  EXPECT_EQ(done.state, RecordState::kCompleted);
  EXPECT_EQ(done.result, stored("res"));
  EXPECT_EQ(done.fingerprint, caps().membership_only ? std::nullopt : std::optional<std::uint64_t>(42));
  EXPECT_EQ(done.expires_at, t0 + milliseconds(5) + kTtl);
  EXPECT_EQ(done.retries, 0u);

  // Inspect is read-only: the lease of an expired claim is not revived, nothing moves.
  ASSERT_TRUE(claim_new("x", "A", t0));
  EXPECT_EQ(inspect_or_die(store(), "x", t0 + kLease + milliseconds(1)), std::nullopt);
  EXPECT_TRUE(claim_new("x", "B", t0 + kLease + milliseconds(1)));
}

// --- purge ------------------------------------------------------------------------

TEST_P(StoreConformance, PurgeRemovesOnlyExpiredRecordsBoundedByMax) {
  const TimePoint t0 = clock_.now();
  auto before = store().purge_expired(t0, 100);
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_EQ(*before, 0u);

  CommitRequest shortlived = commit_req("", "A", t0);
  shortlived.ttl = milliseconds(1000);
  std::vector<std::string> short_ids, long_ids;
  for (int i = 0; i < 7; ++i) short_ids.push_back("short-" + std::to_string(i));
  for (int i = 0; i < 5; ++i) long_ids.push_back("long-" + std::to_string(i));
  for (const auto& id : short_ids) {
    ASSERT_TRUE(claim_new(id, "A", t0));
    shortlived.id = id;
    ASSERT_TRUE(store().commit(shortlived).ok());
  }
  for (const auto& id : long_ids) {
    ASSERT_TRUE(claim_new(id, "A", t0));
    ASSERT_TRUE(store().commit(commit_req(id, "A", t0, "keep"sv)).ok());
  }
  auto none = store().purge_expired(t0 + milliseconds(999), 100);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u) << "nothing has expired yet";

  const TimePoint t1 = t0 + milliseconds(1001);
  if (store().capabilities().native_ttl) {
    auto n = store().purge_expired(t1, 3);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0u) << "backends with native TTL purge nothing themselves";
  } else {
    std::size_t total = 0;
    for (int round = 0; round < 20; ++round) {
      auto n = store().purge_expired(t1, 3);
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      EXPECT_LE(*n, 3u);
      if (round == 0) {
        EXPECT_EQ(*n, 3u) << "7 records are expired";
      }
      total += *n;
      if (*n == 0) break;
    }
    EXPECT_EQ(total, short_ids.size());
  }
  for (const auto& id : long_ids) {
    ClaimResult c = claim_ok(claim_req(id, "B", t1));
    EXPECT_EQ(c.status, ClaimStatus::kCompleted) << id;
    EXPECT_EQ(c.result, stored("keep"));
  }
  for (const auto& id : short_ids) {
    if (caps().fixed_retention.count() > 0) {
      // Kept for the fixed retention whatever the 1 s ttl, forgotten after it.
      EXPECT_EQ(claim_ok(claim_req(id, "B", t1)).status, ClaimStatus::kCompleted) << id;
      EXPECT_TRUE(claim_new(id, "C", t0 + caps().fixed_retention + milliseconds(1))) << id;
    } else {
      EXPECT_TRUE(claim_new(id, "B", t1)) << id;
    }
  }
}

TEST_P(StoreConformance, PurgeIsNotBlockedByALongLivedRecord) {
  const TimePoint t0 = clock_.now();
  // The long-lived records come first, so an oldest-first scan meets them first.
  for (int i = 0; i < 3; ++i) {
    const std::string id = "long-" + std::to_string(i);
    ASSERT_TRUE(claim_new(id, "A", t0));
    ASSERT_TRUE(store().commit(commit_req(id, "A", t0)).ok());
  }
  CommitRequest shortlived = commit_req("", "A", t0);
  shortlived.ttl = milliseconds(1000);
  std::vector<std::string> short_ids;
  for (int i = 0; i < 6; ++i) {
    short_ids.push_back("short-" + std::to_string(i));
    ASSERT_TRUE(claim_new(short_ids.back(), "A", t0));
    shortlived.id = short_ids.back();
    ASSERT_TRUE(store().commit(shortlived).ok());
  }
  // Released claims and expired leases are not live either.
  ASSERT_TRUE(claim_new("released", "A", t0));
  ASSERT_TRUE(store().release(release_req("released", "A", t0, false)).ok());
  ASSERT_TRUE(claim_new("abandoned", "A", t0));

  const TimePoint t1 = t0 + kLease + milliseconds(1);
  if (store().capabilities().native_ttl) {
    auto n = store().purge_expired(t1, 2);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0u);
    return;
  }
  std::size_t total = 0;
  for (int round = 0; round < 50; ++round) {
    auto n = store().purge_expired(t1, 2);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    EXPECT_LE(*n, 2u);
    total += *n;
  }
  // "released" may or may not have kept a record to purge; the rest must all go.
  EXPECT_GE(total, short_ids.size() + 1);
  EXPECT_LE(total, short_ids.size() + 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(claim_ok(claim_req("long-" + std::to_string(i), "B", t1)).status, ClaimStatus::kCompleted);
  }
}

// --- batches ----------------------------------------------------------------------

TEST_P(StoreConformance, ClaimBatchAnswersLikeSingleClaims) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("held", "B", t0));
  ASSERT_TRUE(claim_new("done", "B", t0, 5));
  CommitRequest c = commit_req("done", "B", t0, "stored"sv);
  c.fingerprint = 5;
  ASSERT_TRUE(store().commit(c).ok());
  ASSERT_TRUE(claim_new("retried", "B", t0));
  ASSERT_TRUE(store().release(release_req("retried", "B", t0, true)).ok());

  const TimePoint t1 = t0 + milliseconds(10);
  const std::vector<ClaimRequest> batch = {
      claim_req("fresh", "A", t1),      claim_req("held", "A", t1),    claim_req("done", "A", t1, 5),
      claim_req("done", "A", t1, 6),    claim_req("retried", "A", t1), claim_req("fresh", "A", t1),
      claim_req("fresh-2", "A", t1, 9),
  };
  auto out = store().claim_batch(batch);
  ASSERT_EQ(out.size(), batch.size());
  for (const auto& r : out) ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(out[0]->status, ClaimStatus::kNew);
  EXPECT_EQ(out[1]->status, ClaimStatus::kInProgress);
  EXPECT_EQ(out[1]->owner, "B");
  EXPECT_EQ(out[1]->lease_left, kLease - milliseconds(10));
  EXPECT_EQ(out[2]->status, ClaimStatus::kCompleted);
  EXPECT_EQ(out[2]->result, stored("stored"));
  EXPECT_EQ(out[3]->status, completed_conflict());
  EXPECT_EQ(out[4]->status, ClaimStatus::kNew);
  EXPECT_EQ(out[4]->retries, 1u);
  EXPECT_EQ(out[5]->status, ClaimStatus::kInProgress) << "the batch's own earlier claim holds the lease";
  EXPECT_EQ(out[5]->owner, "A");
  EXPECT_EQ(out[6]->status, ClaimStatus::kNew);

  // The same batch again, one call at a time at the same instant: everything is now held.
  for (std::size_t i : {0u, 4u, 6u}) {
    ClaimResult single = claim_ok(batch[i]);
    EXPECT_EQ(single.status, ClaimStatus::kInProgress) << i;
    EXPECT_EQ(single.owner, "A") << i;
  }
}

TEST_P(StoreConformance, CommitBatchAnswersLikeSingleCommitsWithPerItemFailures) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("mine-1", "A", t0));
  ASSERT_TRUE(claim_new("mine-2", "A", t0));
  ASSERT_TRUE(claim_new("theirs", "B", t0));
  ASSERT_TRUE(claim_new("done", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("done", "A", t0, "old"sv)).ok());
  ASSERT_TRUE(claim_new("retried", "A", t0));
  ASSERT_TRUE(store().release(release_req("retried", "A", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("retried", "A", t0)).retries, 1u);

  const TimePoint t1 = t0 + milliseconds(10);
  const std::vector<CommitRequest> batch = {
      commit_req("mine-1", "A", t1, "r1"sv),    commit_req("theirs", "A", t1, "x"sv),
      commit_req("done", "A", t1, "new"sv),     commit_req("mine-2", "A", t1, std::nullopt, Outcome::kDeadLettered),
      commit_req("mine-1", "A", t1, "again"sv), commit_req("retried", "A", t1, "r3"sv),
  };
  auto out = store().commit_batch(batch);
  ASSERT_EQ(out.size(), batch.size());
  EXPECT_TRUE(out[0].ok()) << out[0].to_string();
  EXPECT_EQ(out[1].code(), StatusCode::kFailedPrecondition) << out[1].to_string();
  EXPECT_EQ(out[2].code(), StatusCode::kFailedPrecondition) << out[2].to_string();
  EXPECT_TRUE(out[3].ok()) << out[3].to_string();
  EXPECT_EQ(out[4].code(), StatusCode::kFailedPrecondition) << "the batch's own earlier commit completed it";
  EXPECT_TRUE(out[5].ok()) << out[5].to_string();

  const TimePoint t2 = t1 + milliseconds(1);
  EXPECT_EQ(claim_ok(claim_req("mine-1", "C", t2)).result, stored("r1"));
  ClaimResult theirs = claim_ok(claim_req("theirs", "C", t2));
  EXPECT_EQ(theirs.status, ClaimStatus::kInProgress);
  EXPECT_EQ(theirs.owner, "B");
  EXPECT_EQ(claim_ok(claim_req("done", "C", t2)).result, stored("old"));
  EXPECT_EQ(claim_ok(claim_req("mine-2", "C", t2)).dead_lettered, !caps().membership_only);
  EXPECT_EQ(inspect_live("retried", t2).retries, 0u);
}

// --- requests breaking a REQUIRES ----------------------------------------------------

// Every store refuses the requests the contract forbids (idem/backend/request_checks.hpp) with
// kInvalidArgument, and writes nothing for them.
TEST_P(StoreConformance, RequestsBreakingARequiresAreRefused) {
  const TimePoint t0 = clock_.now();
  auto refused = [](const Status& s) { return s.code() == StatusCode::kInvalidArgument; };
  ClaimRequest q = claim_req("", "A", t0);
  EXPECT_TRUE(refused(store().claim(q).status())) << "empty id";
  q = claim_req("r", "A", t0);
  q.lease = Duration{0};
  EXPECT_TRUE(refused(store().claim(q).status())) << "lease 0";
  q = claim_req("r", "A", t0);
  q.entity_key = "";
  EXPECT_TRUE(refused(store().claim(q).status())) << "empty entity key";
  EXPECT_TRUE(refused(store().commit(commit_req("", "A", t0)))) << "commit: empty id";
  CommitRequest c = commit_req("r", "A", t0);
  c.ttl = Duration{0};
  EXPECT_TRUE(refused(store().commit(c))) << "commit: ttl 0";
  EXPECT_TRUE(refused(store().release(release_req("", "A", t0, false)).status())) << "release: empty id";
  ReleaseRequest r = release_req("r", "A", t0, true);
  r.retry_ttl = Duration{0};
  EXPECT_TRUE(refused(store().release(r).status())) << "release: retry_ttl 0";
  EXPECT_TRUE(refused(store().extend({"", "A", kLease, t0, std::nullopt}))) << "extend: empty id";
  EXPECT_TRUE(refused(store().extend({"r", "A", Duration{0}, t0, std::nullopt}))) << "extend: lease 0";
  auto none = inspect("r", t0);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->has_value()) << "nothing was written for r";
  claim_new("r", "A", t0);  // r is still new (claim_new asserts it)
}

// --- commit_then_claim ------------------------------------------------------------------

namespace {

// True iff c answers a claim of a fresh id: kNew, or for a probabilistic store
// possibly a false positive (kCompleted).
bool fresh(const ClaimResult& c, bool probabilistic) {
  return c.status == ClaimStatus::kNew || (probabilistic && c.status == ClaimStatus::kCompleted);
}

}  // namespace

// Every store answers commit_then_claim(c, q) as commit(c) followed by claim(q): the
// claim sees the commit, and a failed commit does not stop the claim.
TEST_P(StoreConformance, CommitThenClaimAnswersAsCommitThenClaim) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("ctc-mine", "A", t0));
  ASSERT_TRUE(claim_new("ctc-theirs", "B", t0));
  const TimePoint t1 = t0 + milliseconds(10);

  // The commit lands and the next id is claimed.
  auto first = store().commit_then_claim(commit_req("ctc-mine", "A", t1, "r1"sv), claim_req("ctc-next", "A", t1));
  EXPECT_TRUE(first.commit.ok()) << first.commit.to_string();
  ASSERT_TRUE(first.claim.ok()) << first.claim.status().to_string();
  EXPECT_TRUE(fresh(*first.claim, caps().probabilistic)) << static_cast<int>(first.claim->status);
  if (first.claim->status == ClaimStatus::kNew) {
    EXPECT_EQ(first.claim->retries, 0u);
    const RecordInfo next = inspect_live("ctc-next", t1);
    EXPECT_EQ(next.state, RecordState::kInProgress);
    EXPECT_EQ(next.owner, "A");
  }

  // The claim sees the commit made just before it (the same id).
  auto same = store().commit_then_claim(commit_req("ctc-same", "A", t1, "r2"sv), claim_req("ctc-same", "B", t1));
  EXPECT_EQ(same.commit.code(), StatusCode::kOk) << "a commit without a lease is accepted: " << same.commit.to_string();
  ASSERT_TRUE(same.claim.ok()) << same.claim.status().to_string();
  EXPECT_EQ(same.claim->status, ClaimStatus::kCompleted);
  EXPECT_EQ(same.claim->result, stored("r2"s));

  // A commit refused (another owner's lease) does not stop the claim.
  auto refused = store().commit_then_claim(commit_req("ctc-theirs", "A", t1), claim_req("ctc-other", "A", t1));
  EXPECT_EQ(refused.commit.code(), StatusCode::kFailedPrecondition) << refused.commit.to_string();
  ASSERT_TRUE(refused.claim.ok()) << refused.claim.status().to_string();
  EXPECT_TRUE(fresh(*refused.claim, caps().probabilistic)) << static_cast<int>(refused.claim->status);

  // A claim of an id leased to another owner answers kInProgress.
  auto held = store().commit_then_claim(commit_req("ctc-after", "A", t1), claim_req("ctc-theirs", "A", t1));
  EXPECT_TRUE(held.commit.ok()) << held.commit.to_string();
  ASSERT_TRUE(held.claim.ok()) << held.claim.status().to_string();
  EXPECT_EQ(held.claim->status, ClaimStatus::kInProgress);
  EXPECT_EQ(held.claim->owner, "B");

  // The records are what the two calls leave.
  const TimePoint t2 = t1 + milliseconds(1);
  ClaimResult mine = claim_ok(claim_req("ctc-mine", "C", t2));
  EXPECT_EQ(mine.status, ClaimStatus::kCompleted);
  EXPECT_EQ(mine.result, stored("r1"s));
  EXPECT_EQ(inspect_live("ctc-theirs", t2).state, RecordState::kInProgress);
  EXPECT_EQ(inspect_live("ctc-theirs", t2).owner, "B");
}

// A store that declares combined_commit_claim answers commit_then_claim in one round
// trip with the answers of the two calls; one that does not keeps Store's default
// (the declared departure: the two calls, so Consumer::process(m, next) keeps the plain
// path). Either way the answers equal those of commit() and claim() made separately,
// checked here on twin ids across the cases of the test above.
TEST_P(StoreConformance, CommitThenClaimEqualsTheTwoCallsWhetherCombinedOrNot) {
  EXPECT_EQ(store().capabilities().combined_commit_claim, caps().combined_commit_claim)
      << (caps().combined_commit_claim ? "the store declares the combined call"
                                       : "departure: the store keeps the two calls and says so");
  const TimePoint t0 = clock_.now();
  for (std::string twin : {"combined-", "separate-"}) {
    ASSERT_TRUE(claim_new(twin + "mine", "A", t0));
    ASSERT_TRUE(claim_new(twin + "theirs", "B", t0));
  }
  const TimePoint t1 = t0 + milliseconds(10);
  struct Case {
    std::string commit_id, commit_owner, claim_id, claim_owner;
  };
  const std::vector<Case> cases = {
      {"mine", "A", "next", "A"},     // both succeed
      {"next", "A", "next", "B"},     // the claim sees the commit
      {"theirs", "A", "other", "A"},  // a refused commit, then a fresh claim
      {"done", "A", "theirs", "A"},   // a claim of a held id
      {"mine", "A", "mine", "A"},     // a commit of a completed id, then its claim
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.commit_id + " then " + k.claim_id);
    const std::string cc = "combined-" + k.commit_id, cq = "combined-" + k.claim_id;
    const std::string sc = "separate-" + k.commit_id, sq = "separate-" + k.claim_id;
    auto both = store().commit_then_claim(commit_req(cc, k.commit_owner, t1, "r"sv), claim_req(cq, k.claim_owner, t1));
    const Status commit = store().commit(commit_req(sc, k.commit_owner, t1, "r"sv));
    auto claim = store().claim(claim_req(sq, k.claim_owner, t1));
    EXPECT_EQ(both.commit.code(), commit.code()) << both.commit.to_string() << " vs " << commit.to_string();
    ASSERT_EQ(both.claim.ok(), claim.ok());
    if (!claim.ok()) continue;
    if (caps().probabilistic &&
        (both.claim->status == ClaimStatus::kCompleted) != (claim->status == ClaimStatus::kCompleted))
      continue;  // a false positive on one twin only
    EXPECT_EQ(both.claim->status, claim->status);
    EXPECT_EQ(both.claim->result, claim->result);
    EXPECT_EQ(both.claim->retries, claim->retries);
    EXPECT_EQ(both.claim->owner, claim->owner);
    EXPECT_EQ(both.claim->lease_left, claim->lease_left);
  }
}

// --- atomic commit ------------------------------------------------------------------

TEST_P(StoreConformance, FailedCommitLeavesTheRecordUntouched) {
  const TimePoint t0 = clock_.now();
  // A commit the store rejects changes nothing (every backend).
  ASSERT_TRUE(claim_new("m", "B", t0));
  ASSERT_TRUE(store().release(release_req("m", "B", t0, true)).ok());
  ASSERT_EQ(claim_ok(claim_req("m", "B", t0)).retries, 1u);
  Status rejected = store().commit(commit_req("m", "A", t0, "x"sv));
  ASSERT_EQ(rejected.code(), StatusCode::kFailedPrecondition);
  RecordInfo info = inspect_live("m", t0);
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.retries, 1u);
  EXPECT_FALSE(info.result.has_value());

  if (!caps().fault_hook) {
    EXPECT_FALSE(caps().no_fault_hook_reason.empty());
    return;
  }
  // Learn the points a commit passes, then fail at each in turn.
  ASSERT_TRUE(claim_new("probe", "A", t0));
  faults_.clear_seen();
  ASSERT_TRUE(store().commit(commit_req("probe", "A", t0, "p"sv)).ok());
  const std::vector<std::string> points = faults_.seen();
  ASSERT_FALSE(points.empty()) << "the factory says the backend calls its fault hook inside commit";
  int n = 0;
  for (const std::string& point : points) {
    SCOPED_TRACE("fault at " + point);
    const std::string id = "atomic-" + std::to_string(n++);
    faults_.fail_at({});
    ASSERT_TRUE(claim_new(id, "A", t0));
    ASSERT_TRUE(store().release(release_req(id, "A", t0, true)).ok());
    ASSERT_EQ(claim_ok(claim_req(id, "A", t0)).retries, 1u);
    faults_.fail_at(point);
    Status s = store().commit(commit_req(id, "A", t0, "must not land"sv));
    faults_.fail_at({});
    EXPECT_FALSE(s.ok()) << "the commit must report the injected failure";
    auto after = inspect_or_die(store(), id, t0);
    ASSERT_TRUE(after.has_value());
    EXPECT_NE(after->state, RecordState::kCompleted);
    EXPECT_NE(after->state, RecordState::kDeadLettered);
    EXPECT_EQ(after->retries, 1u) << "the retry count is cleared only by a commit that lands";
    EXPECT_FALSE(after->result.has_value());
    ClaimResult c = claim_ok(claim_req(id, "B", t0));
    EXPECT_NE(c.status, ClaimStatus::kCompleted);
    // With the fault gone, the owner's commit goes through.
    ASSERT_TRUE(store().commit(commit_req(id, "A", t0, "landed"sv)).ok());
    EXPECT_EQ(claim_ok(claim_req(id, "B", t0)).result, std::optional<std::string>("landed"));
  }
  if (caps().durable) {
    // And a failed commit is not found after a reopen either.
    ASSERT_TRUE(claim_new("durable-atomic", "A", t0));
    faults_.fail_at(points.back());
    EXPECT_FALSE(store().commit(commit_req("durable-atomic", "A", t0, "no"sv)).ok());
    faults_.fail_at({});
    reopen();
    auto after = inspect_or_die(store(), "durable-atomic", t0);
    EXPECT_TRUE(!after.has_value() || (after->state != RecordState::kCompleted && !after->result));
  }
}

TEST_P(StoreConformance, FailedCommitBatchLeavesEveryRecordUntouched) {
  const TimePoint t0 = clock_.now();
  if (!caps().fault_hook) {
    // Without a hook, a batch whose items are all rejected changes nothing.
    ASSERT_TRUE(claim_new("b1", "B", t0));
    ASSERT_TRUE(claim_new("b2", "B", t0));
    const std::vector<CommitRequest> batch = {commit_req("b1", "A", t0, "x"sv), commit_req("b2", "A", t0, "y"sv)};
    for (const Status& s : store().commit_batch(batch)) EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(inspect_live("b1", t0).state, RecordState::kInProgress);
    EXPECT_EQ(inspect_live("b2", t0).state, RecordState::kInProgress);
    EXPECT_FALSE(caps().no_fault_hook_reason.empty());
    return;
  }
  auto make_batch = [&](const std::string& prefix) {
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
      ids.push_back(prefix + std::to_string(i));
      EXPECT_TRUE(claim_new(ids.back(), "A", t0));
      EXPECT_TRUE(store().release(release_req(ids.back(), "A", t0, true)).ok());
      EXPECT_EQ(claim_ok(claim_req(ids.back(), "A", t0)).retries, 1u);
    }
    return ids;
  };
  const std::vector<std::string> probe = make_batch("probe-");
  std::vector<CommitRequest> reqs;
  for (const auto& id : probe) reqs.push_back(commit_req(id, "A", t0, "r"sv));
  faults_.clear_seen();
  for (const Status& s : store().commit_batch(reqs)) ASSERT_TRUE(s.ok()) << s.to_string();
  const std::vector<std::string> points = faults_.seen();
  ASSERT_FALSE(points.empty());
  int n = 0;
  for (const std::string& point : points) {
    SCOPED_TRACE("fault at " + point);
    const std::vector<std::string> ids = make_batch("batch-" + std::to_string(n++) + "-");
    std::vector<CommitRequest> batch;
    for (const auto& id : ids) batch.push_back(commit_req(id, "A", t0, "must not land"sv));
    faults_.fail_at(point);
    const std::vector<Status> out = store().commit_batch(batch);
    faults_.fail_at({});
    ASSERT_EQ(out.size(), batch.size());
    // Whatever each item reports, an item reported OK must have landed and an item
    // reported failed must not have; and at least one must report the fault.
    int failed = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto after = inspect_or_die(store(), ids[i], t0);
      ASSERT_TRUE(after.has_value());
      if (out[i].ok()) {
        EXPECT_EQ(after->state, RecordState::kCompleted) << ids[i];
      } else {
        ++failed;
        EXPECT_NE(after->state, RecordState::kCompleted) << ids[i];
        EXPECT_EQ(after->retries, 1u) << ids[i];
        EXPECT_FALSE(after->result.has_value()) << ids[i];
      }
    }
    EXPECT_GT(failed, 0) << "the injected fault must be reported";
    // With the fault gone, the owner's commits of the failed items go through: the
    // failed batch left no mark on their leases.
    std::vector<CommitRequest> again;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!out[i].ok()) again.push_back(commit_req(ids[i], "A", t0, "landed"sv));
    }
    for (const Status& s : store().commit_batch(again)) EXPECT_TRUE(s.ok()) << s.to_string();
    for (const CommitRequest& q : again) EXPECT_EQ(claim_ok(claim_req(q.id, "B", t0)).result, stored("landed")) << q.id;
  }
}

// --- concurrency ------------------------------------------------------------------

TEST_P(StoreConformance, ConcurrentClaimsGrantExactlyOneLease) {
  constexpr int kThreads = 8;
  constexpr int kIds = 300;
  const TimePoint t0 = clock_.now();
  std::vector<std::atomic<int>> winners(kIds);
  std::vector<std::atomic<int>> errors(kThreads);
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string owner = "owner-" + std::to_string(t);
      for (int i = 0; i < kIds; ++i) {
        if (i % 50 == 0) sync.arrive_and_wait();
        const std::string id = "race-" + std::to_string(i);
        auto c = store_->claim({id, owner, kLease, std::nullopt, t0, std::nullopt});
        if (!c.ok()) {
          errors[t].fetch_add(1);
          continue;
        }
        if (c->status == ClaimStatus::kNew) winners[i].fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t].load(), 0) << "thread " << t;
  int exactly_one = 0;
  for (int i = 0; i < kIds; ++i) {
    if (caps().probabilistic) {
      EXPECT_LE(winners[i].load(), 1) << "id " << i;
    } else {
      EXPECT_EQ(winners[i].load(), 1) << "id " << i;
    }
    exactly_one += winners[i].load() == 1;
  }
  EXPECT_GE(exactly_one, caps().probabilistic ? kIds / 2 : kIds);
}

TEST_P(StoreConformance, ConcurrentCommitsOfOneLeaseLandOnce) {
  constexpr int kThreads = 8;
  const TimePoint t0 = clock_.now();
  for (int i = 0; i < 50; ++i) {
    const std::string id = "commit-race-" + std::to_string(i);
    ASSERT_TRUE(claim_new(id, "A", t0));
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string result = "r" + std::to_string(t);
        if (store_->commit(commit_req(id, "A", t0, result)).ok()) ok.fetch_add(1);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), 1) << id;
  }
}

// --- durability -------------------------------------------------------------------

TEST_P(StoreConformance, ReopenKeepsCommittedRecordsOfDurableStores) {
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("done", "A", t0, 77));
  CommitRequest c = commit_req("done", "A", t0, "kept"sv);
  c.fingerprint = 77;
  ASSERT_TRUE(store().commit(c).ok());
  ASSERT_TRUE(claim_new("dl", "A", t0));
  ASSERT_TRUE(store().commit(commit_req("dl", "A", t0, std::nullopt, Outcome::kDeadLettered)).ok());
  ASSERT_TRUE(claim_new("failing", "A", t0));
  ASSERT_TRUE(store().release(release_req("failing", "A", t0, true)).ok());
  ASSERT_TRUE(claim_new("short", "A", t0));
  CommitRequest s = commit_req("short", "A", t0);
  s.ttl = milliseconds(1000);
  ASSERT_TRUE(store().commit(s).ok());

  reopen();
  const TimePoint t1 = t0 + milliseconds(2000);
  if (caps().durable) {
    ClaimResult d = claim_ok(claim_req("done", "B", t1, 77));
    EXPECT_EQ(d.status, ClaimStatus::kCompleted);
    EXPECT_EQ(d.result, std::optional<std::string>("kept"));
    EXPECT_EQ(claim_ok(claim_req("done", "B", t1, 78)).status, ClaimStatus::kConflict);
    EXPECT_TRUE(claim_ok(claim_req("dl", "B", t1)).dead_lettered);
    ClaimResult f = claim_ok(claim_req("failing", "B", t1));
    EXPECT_EQ(f.status, ClaimStatus::kNew);
    EXPECT_EQ(f.retries, 1u) << "retry counts are durable";
    EXPECT_TRUE(claim_new("short", "B", t1)) << "expiry still applies after reopen";
    // And a second reopen sees what the first handle wrote.
    ASSERT_TRUE(store().commit(commit_req("failing", "B", t1, "second"sv)).ok());
    reopen();
    EXPECT_EQ(claim_ok(claim_req("failing", "C", t1)).result, std::optional<std::string>("second"));
  } else {
    // Not durable: the reopened store is a working store; what it remembers is not
    // promised, so only its behaviour for a new id is checked.
    EXPECT_TRUE(claim_new("after-reopen", "B", t1));
    ASSERT_TRUE(store().commit(commit_req("after-reopen", "B", t1)).ok());
    EXPECT_EQ(claim_ok(claim_req("after-reopen", "C", t1)).status, ClaimStatus::kCompleted);
  }
}

TEST_P(StoreConformance, SharedStoresSeeEachOther) {
  if (!caps().shared) {
    EXPECT_FALSE(store().capabilities().shared);
    return;
  }
  const TimePoint t0 = clock_.now();
  std::shared_ptr<Store> second = open_second();
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(claim_new("m", "A", t0));
  auto other = second->claim(claim_req("m", "B", t0 + milliseconds(1)));
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->status, ClaimStatus::kInProgress);
  EXPECT_EQ(other->owner, "A");
  ASSERT_TRUE(store().commit(commit_req("m", "A", t0 + milliseconds(2), "r"sv)).ok());
  auto dup = second->claim(claim_req("m", "B", t0 + milliseconds(3)));
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->status, ClaimStatus::kCompleted);
  EXPECT_EQ(dup->result, std::optional<std::string>("r"));
}

// --- ids --------------------------------------------------------------------------

TEST_P(StoreConformance, BinaryShortAndLongIdsAreDistinctKeys) {
  const TimePoint t0 = clock_.now();
  std::string long_id(512, 'x');
  for (std::size_t i = 0; i < long_id.size(); ++i) long_id[i] = static_cast<char>(i % 256);
  std::string long_id_2 = long_id;
  long_id_2.back() = static_cast<char>(long_id_2.back() + 1);
  const std::vector<std::string> ids = {
      "a"s, "\0"s, "a\0b"s, "a\0c"s, "a\0"s, "\xff\xfe\x80"s, "\xff"s, "\xc3\x28"s, long_id, long_id_2,
  };
  for (const auto& id : ids) ASSERT_TRUE(claim_new(id, "A", t0)) << "id of " << id.size() << " bytes";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(store().commit(commit_req(ids[i], "A", t0, "r" + std::to_string(i))).ok()) << i;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ClaimResult c = claim_ok(claim_req(ids[i], "B", t0 + milliseconds(1)));
    EXPECT_EQ(c.status, ClaimStatus::kCompleted) << i;
    EXPECT_EQ(c.result, stored("r" + std::to_string(i))) << i;
    EXPECT_EQ(inspect_live(ids[i], t0).state, RecordState::kCompleted) << i;
  }
  // Prefixes of stored ids were never claimed.
  for (const std::string& id : {"\xff\xfe"s, "a\0b\0"s, long_id.substr(0, 511)}) {
    EXPECT_TRUE(claim_new(id, "A", t0)) << "id of " << id.size() << " bytes";
  }
  // Release, retry counts and extend work on binary ids too.
  const std::string bin = "\0\xff\0"s;
  ASSERT_TRUE(claim_new(bin, "A", t0));
  ASSERT_TRUE(store().extend({bin, "A", kLease, t0 + milliseconds(1), std::nullopt}).ok());
  auto r = store().release(release_req(bin, "A", t0 + milliseconds(2), true));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 1u);
  EXPECT_EQ(claim_ok(claim_req(bin, "B", t0 + milliseconds(3))).retries, 1u);
}

TEST_P(StoreConformance, BinaryOwnersAndResults) {
  const TimePoint t0 = clock_.now();
  const std::string owner = "own\0er\xff"s;
  ASSERT_TRUE(claim_new("m", owner, t0));
  ClaimResult c = claim_ok(claim_req("m", "B", t0));
  EXPECT_EQ(c.owner, owner);
  EXPECT_EQ(store().commit(commit_req("m", "own", t0)).code(), StatusCode::kFailedPrecondition)
      << "owners are compared as whole byte strings";
  ASSERT_TRUE(store().commit(commit_req("m", owner, t0, "\0\xff"sv)).ok());
  EXPECT_EQ(claim_ok(claim_req("m", "B", t0)).result, stored("\0\xff"s));
}

// --- false positives ----------------------------------------------------------------

TEST_P(StoreConformance, FreshIdsAreNewUpToTheStatedFalsePositiveRate) {
  const TimePoint t0 = clock_.now();
  for (int i = 0; i < 500; ++i) {
    const std::string id = "committed-" + std::to_string(i);
    if (claim_new(id, "A", t0)) {
      ASSERT_TRUE(store().commit(commit_req(id, "A", t0)).ok());
    }
  }
  constexpr int kFresh = 2000;
  int false_positives = 0;
  for (int i = 0; i < kFresh; ++i) {
    ClaimResult c = claim_ok(claim_req("fresh-" + std::to_string(i), "A", t0));
    if (c.status == ClaimStatus::kCompleted) {
      ++false_positives;
    } else {
      EXPECT_EQ(c.status, ClaimStatus::kNew) << i;
    }
  }
  // Allow 3x the stated rate plus a few for sampling noise; zero for exact stores.
  const double allowed = caps().probabilistic ? 3.0 * caps().false_positive_rate * kFresh + 5 : 0;
  EXPECT_LE(false_positives, allowed);
  // No store forgets a committed id while it is live, probabilistic or not.
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(claim_ok(claim_req("committed-" + std::to_string(i), "B", t0)).status, ClaimStatus::kCompleted) << i;
  }
}

}  // namespace idem::conformance
