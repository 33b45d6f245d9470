// The store conformance suite, part 2: entity records and the reorder buffer
// (include/idem/entity.hpp; the entity fields of ClaimRequest and CommitRequest in
// include/idem/store.hpp). A factory without `entities` is checked to have no
// EntityStore (entities() null), in every test below.
//
// As store.hpp requires of callers, an id that is committed with an entity write
// carries that entity's key on every claim, release, extend and commit, and is
// inspected through the factory's inspect with that key (a store may place the id's
// record by it: the Redis store does on a cluster). Ids claimed without a key are
// never committed with an entity write.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "conformance/store_conformance.hpp"
#include "support/entity_requests.hpp"

namespace idem::conformance {

using idem::testing::bp;
using idem::testing::ew;
using std::chrono::milliseconds;
using namespace std::string_literals;
using namespace std::string_view_literals;

namespace {

EntityRecord read(Store& s, std::string_view key) {
  auto r = s.entities()->read_entity(key);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : EntityRecord{.revision = 999'999, .version = 999'999, .state = "read failed"};
}

std::vector<BufferEntry> buffered(Store& s, std::string_view key, std::size_t max = 1000) {
  auto r = s.entities()->buffer_read(key, max);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<BufferEntry>{};
}

std::vector<std::uint64_t> versions(const std::vector<BufferEntry>& entries) {
  std::vector<std::uint64_t> v;
  for (const auto& e : entries) v.push_back(e.version);
  return v;
}

BufferSummary summary(Store& s, std::size_t max_keys = 1000) {
  auto r = s.entities()->buffer_summary(max_keys);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : BufferSummary{.count = 999'999, .bytes = 0, .keys = {}};
}

::testing::AssertionResult is_record(const EntityRecord& r, std::uint64_t revision, std::uint64_t version,
                                     std::string_view state) {
  if (r.revision == revision && r.version == version && r.state == state) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "record {revision " << r.revision << ", version " << r.version
                                       << ", state of " << r.state.size() << " bytes \"" << r.state << "\"}, expected {"
                                       << revision << ", " << version << ", \"" << state << "\"}";
}

// A store without entities has no EntityStore.
void expect_no_entities(Store& s) { EXPECT_EQ(s.entities(), nullptr); }

std::size_t entry_bytes(std::string_view key, std::string_view id, std::string_view message) {
  return key.size() + id.size() + message.size();
}

// `q` carrying `key`.
ClaimRequest keyed(ClaimRequest q, std::string_view key) {
  q.entity_key = key;
  return q;
}
ReleaseRequest keyed(ReleaseRequest q, std::string_view key) {
  q.entity_key = key;
  return q;
}

// `c` with the entity write `w`, carrying w's key as the claims of the id did.
CommitRequest with_entity(CommitRequest c, const EntityWrite& w) {
  c.entity = w;
  c.entity_key = w.key;
  return c;
}

}  // namespace

// --- capability -------------------------------------------------------------------

TEST_P(StoreConformance, EntityMethodsAnswerAsTheCapabilitySays) {
  EXPECT_EQ(store().entities() != nullptr, caps().entities);
  if (!caps().entities) {
    expect_no_entities(store());
    return;
  }
  const TimePoint t0 = clock_.now();
  EXPECT_TRUE(store().entities()->read_entity("k").ok());
  EXPECT_TRUE(store().entities()->write_entity(ew("k", 0, 1)).ok());
  EXPECT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "x", t0)).ok());
  EXPECT_TRUE(store().entities()->buffer_read("k", 10).ok());
  EXPECT_TRUE(store().entities()->buffer_remove("k", 3).ok());
  EXPECT_TRUE(store().entities()->buffer_summary(10).ok());
}

// --- entity records -----------------------------------------------------------------

TEST_P(StoreConformance, EntityAbsentRecordIsRevisionZero) {
  if (!caps().entities) return expect_no_entities(store());
  EXPECT_TRUE(is_record(read(store(), "never-written"), 0, 0, ""));
  ASSERT_TRUE(store().entities()->write_entity(ew("ab", 0, 4, "s"sv)).ok());
  // Neither a prefix nor an extension of a written key has a record.
  EXPECT_TRUE(is_record(read(store(), "a"), 0, 0, ""));
  EXPECT_TRUE(is_record(read(store(), "abc"), 0, 0, ""));
  EXPECT_TRUE(is_record(read(store(), "ab"), 1, 4, "s"));
}

TEST_P(StoreConformance, EntityWriteIsACompareAndSetOnTheRevision) {
  if (!caps().entities) return expect_no_entities(store());
  // Create: expect 0.
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 3, "open"sv)).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 3, "open"));

  // A second create fails and changes nothing.
  Status again = store().entities()->write_entity(ew("k", 0, 9, "other"sv));
  EXPECT_EQ(again.code(), StatusCode::kAborted) << again.to_string();
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 3, "open"));
  // So does a revision from the future.
  Status ahead = store().entities()->write_entity(ew("k", 5, 9, "other"sv));
  EXPECT_EQ(ahead.code(), StatusCode::kAborted) << ahead.to_string();
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 3, "open"));

  // Only the given fields are replaced.
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 1, std::nullopt, "closed"sv)).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 2, 3, "closed"));
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 2, 7)).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 3, 7, "closed"));
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 3, std::nullopt)).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 4, 7, "closed")) << "a write without fields still moves the revision";

  // The old revision is stale now.
  EXPECT_EQ(store().entities()->write_entity(ew("k", 3, 8)).code(), StatusCode::kAborted);
  EXPECT_TRUE(is_record(read(store(), "k"), 4, 7, "closed"));

  // Keys are independent.
  ASSERT_TRUE(store().entities()->write_entity(ew("k2", 0, std::nullopt, "x"sv)).ok());
  EXPECT_TRUE(is_record(read(store(), "k2"), 1, 0, "x"));
  EXPECT_TRUE(is_record(read(store(), "k"), 4, 7, "closed"));
}

TEST_P(StoreConformance, EntityWriteWithUnbufferRemovesTheEntryOnlyIfItLands) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "m2", "two", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "three", t0)).ok());
  EXPECT_EQ(store().entities()->write_entity(ew("k", 1, 2, std::nullopt, 2)).code(), StatusCode::kAborted);
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{2, 3})) << "a failed write keeps the entry";
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 2, std::nullopt, 2)).ok());
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 1, 3, std::nullopt, 99)).ok()) << "unbuffer of an absent entry";
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));
  EXPECT_TRUE(is_record(read(store(), "k"), 2, 3, ""));
}

// --- claim and commit with an entity ------------------------------------------------

TEST_P(StoreConformance, EntityClaimReturnsTheRecordOnlyWhenAskedFor) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ClaimRequest first = claim_req("m1", "A", t0);
  first.entity_key = "k";
  ClaimResult c1 = claim_ok(first);
  ASSERT_EQ(c1.status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c1.entity, 0, 0, ""));

  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 5, "s5"sv)).ok());
  ClaimRequest second = claim_req("m2", "A", t0);
  second.entity_key = "k";
  ClaimResult c2 = claim_ok(second);
  ASSERT_EQ(c2.status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c2.entity, 1, 5, "s5"));

  ClaimResult c3 = claim_ok(claim_req("m3", "A", t0));
  ASSERT_EQ(c3.status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c3.entity, 0, 0, "")) << "without entity_key the record is not read";

  // Release and extend carrying the key behave as without it.
  ExtendRequest ext{"m2", "A", milliseconds(20'000), t0 + milliseconds(1), "k"sv};
  ASSERT_TRUE(store().extend(ext).ok());
  EXPECT_EQ(inspect_live("m2", t0 + milliseconds(1), "k"sv).lease_until, t0 + milliseconds(20'001));
  ReleaseRequest rel = release_req("m2", "A", t0 + milliseconds(2), true);
  rel.entity_key = "k";
  auto retries = store().release(rel);
  ASSERT_TRUE(retries.ok()) << retries.status().to_string();
  EXPECT_EQ(*retries, 1u);
  ClaimRequest again = claim_req("m2", "B", t0 + milliseconds(3));
  again.entity_key = "k";
  ClaimResult c4 = claim_ok(again);
  EXPECT_EQ(c4.status, ClaimStatus::kNew);
  EXPECT_EQ(c4.retries, 1u);
  EXPECT_TRUE(is_record(c4.entity, 1, 5, "s5"));
}

TEST_P(StoreConformance, EntityCommitWritesTheRecordWithTheDedupRecord) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ClaimRequest q = claim_req("m1", "A", t0);
  q.entity_key = "k";
  ASSERT_EQ(claim_ok(q).status, ClaimStatus::kNew);
  CommitRequest c = with_entity(commit_req("m1", "A", t0, "r1"sv), ew("k", 0, 1, "s1"sv));
  ASSERT_TRUE(store().commit(c).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s1"));
  ClaimResult dup = claim_ok(keyed(claim_req("m1", "B", t0 + milliseconds(1)), "k"));
  EXPECT_EQ(dup.status, ClaimStatus::kCompleted);
  EXPECT_EQ(dup.result, std::optional<std::string>("r1"));

  // The next message of the key sees the record in its claim and builds on it.
  ClaimRequest q2 = claim_req("m2", "A", t0 + milliseconds(2));
  q2.entity_key = "k";
  ClaimResult c2 = claim_ok(q2);
  ASSERT_EQ(c2.status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c2.entity, 1, 1, "s1"));
  CommitRequest commit2 = with_entity(commit_req("m2", "A", t0 + milliseconds(2)), ew("k", c2.entity.revision, 2));
  ASSERT_TRUE(store().commit(commit2).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 2, 2, "s1"));
  EXPECT_EQ(inspect_live("m2", t0 + milliseconds(3), "k"sv).state, RecordState::kCompleted);
}

TEST_P(StoreConformance, EntityRevisionMismatchAbortsTheCommitAndWritesNothing) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 1, "s1"sv)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "three", t0)).ok());
  ClaimRequest q = claim_req("m3", "A", t0);
  q.entity_key = "k";
  ClaimResult granted = claim_ok(q);
  ASSERT_EQ(granted.status, ClaimStatus::kNew);
  ASSERT_EQ(granted.entity.revision, 1u);
  ASSERT_TRUE(store().release(keyed(release_req("m3", "A", t0, true), "k")).ok());
  ASSERT_EQ(claim_ok(q).retries, 1u);

  // Someone else moves the record on.
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 1, 2, "s2"sv)).ok());

  CommitRequest stale = with_entity(commit_req("m3", "A", t0 + milliseconds(1), "r3"sv), ew("k", 1, 3, "s3"sv, 3));
  Status s = store().commit(stale);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();

  // Nothing was written: entity, dedup record, lease and buffer are as before.
  EXPECT_TRUE(is_record(read(store(), "k"), 2, 2, "s2"));
  RecordInfo info = inspect_live("m3", t0 + milliseconds(1), "k"sv);
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.owner, "A");
  EXPECT_EQ(info.retries, 1u);
  EXPECT_FALSE(info.result.has_value());
  ClaimResult other = claim_ok(keyed(claim_req("m3", "B", t0 + milliseconds(1)), "k"));
  EXPECT_EQ(other.status, ClaimStatus::kInProgress) << "the lease is still held";
  EXPECT_EQ(other.owner, "A");
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));

  // The owner commits again with the right revision.
  CommitRequest fresh = stale;
  fresh.entity->expect_revision = 2;
  ASSERT_TRUE(store().commit(fresh).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 3, 3, "s3"));
  EXPECT_TRUE(buffered(store(), "k").empty());
  ClaimResult dup = claim_ok(keyed(claim_req("m3", "B", t0 + milliseconds(2)), "k"));
  EXPECT_EQ(dup.status, ClaimStatus::kCompleted);
  EXPECT_EQ(dup.result, std::optional<std::string>("r3"));
  EXPECT_EQ(inspect_live("m3", t0 + milliseconds(2), "k"sv).retries, 0u);

  // An id with no record at all gets none from an aborted commit.
  CommitRequest unclaimed = with_entity(commit_req("never-claimed", "A", t0, "x"sv), ew("k", 0, 4));
  EXPECT_EQ(store().commit(unclaimed).code(), StatusCode::kAborted);
  auto never = inspect("never-claimed", t0, "k"sv);
  ASSERT_TRUE(never.ok()) << never.status().to_string();
  EXPECT_EQ(*never, std::nullopt);
  EXPECT_TRUE(is_record(read(store(), "k"), 3, 3, "s3"));
}

TEST_P(StoreConformance, EntityCommitRejectedForTheLeaseWritesNoEntity) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "m1", "one", t0)).ok());
  ASSERT_TRUE(claim_new("m1", "B", t0, std::nullopt, "k"sv));
  CommitRequest foreign = with_entity(commit_req("m1", "A", t0, "x"sv), ew("k", 0, 1, "s"sv, 1));
  EXPECT_EQ(store().commit(foreign).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(is_record(read(store(), "k"), 0, 0, ""));
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{1}));

  // Nor does a commit of an id already completed.
  CommitRequest own = foreign;
  own.owner = "B";
  ASSERT_TRUE(store().commit(own).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
  CommitRequest twice = own;
  twice.entity = ew("k", 1, 2, "t"sv);
  EXPECT_EQ(store().commit(twice).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
}

TEST_P(StoreConformance, EntityCommitWithUnbufferRemovesTheEntryInTheSameStep) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "m2", "two", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "three", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("other", 2, "o2", "two", t0)).ok());
  ASSERT_TRUE(claim_new("m2", "A", t0, std::nullopt, "k"sv));
  CommitRequest c = with_entity(commit_req("m2", "A", t0), ew("k", 0, 2, std::nullopt, 2));
  ASSERT_TRUE(store().commit(c).ok());
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(versions(buffered(store(), "other")), (std::vector<std::uint64_t>{2})) << "only (key, version) goes";
  BufferSummary sum = summary(store());
  EXPECT_EQ(sum.count, 2u);
  EXPECT_EQ(sum.bytes, entry_bytes("k", "m3", "three") + entry_bytes("other", "o2", "two"));

  // Unbuffer of an entry that is not there is a no-op.
  ASSERT_TRUE(claim_new("m9", "A", t0, std::nullopt, "k"sv));
  CommitRequest absent = with_entity(commit_req("m9", "A", t0), ew("k", 1, 9, std::nullopt, 9));
  ASSERT_TRUE(store().commit(absent).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 2, 9, ""));
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));
}

TEST_P(StoreConformance, EntityDeadLetteredCommitCarriesAnEntityWrite) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "dl", "one", t0)).ok());
  ASSERT_TRUE(claim_new("dl", "A", t0, std::nullopt, "k"sv));
  CommitRequest c =
      with_entity(commit_req("dl", "A", t0, std::nullopt, Outcome::kDeadLettered), ew("k", 0, 1, "failed"sv, 1));
  ASSERT_TRUE(store().commit(c).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "failed"));
  EXPECT_TRUE(buffered(store(), "k").empty());
  ClaimResult dup = claim_ok(keyed(claim_req("dl", "B", t0 + milliseconds(1)), "k"));
  EXPECT_EQ(dup.status, ClaimStatus::kCompleted);
  EXPECT_EQ(dup.dead_lettered, !caps().membership_only);
}

TEST_P(StoreConformance, EntityBatchesAnswerLikeSingleCalls) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 1, "s"sv)).ok());
  // "plain" is claimed without a key (and never committed with an entity write).
  std::vector<ClaimRequest> claims = {keyed(claim_req("b1", "A", t0), "k"), claim_req("plain", "A", t0),
                                      keyed(claim_req("b2", "A", t0), "k"), keyed(claim_req("b3", "A", t0), "k")};
  auto granted = store().claim_batch(claims);
  ASSERT_EQ(granted.size(), 4u);
  for (const auto& g : granted) {
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ(g->status, ClaimStatus::kNew);
  }
  EXPECT_TRUE(is_record(granted[0]->entity, 1, 1, "s"));
  EXPECT_TRUE(is_record(granted[1]->entity, 0, 0, ""));
  EXPECT_TRUE(is_record(granted[2]->entity, 1, 1, "s"));
  EXPECT_TRUE(is_record(granted[3]->entity, 1, 1, "s"));

  // A chain of writes in one batch: each sees the one before; the stale one aborts.
  std::vector<CommitRequest> commits = {with_entity(commit_req("b1", "A", t0, "r1"sv), ew("k", 1, 2)),
                                        with_entity(commit_req("b2", "A", t0, "r2"sv), ew("k", 2, 3)),
                                        with_entity(commit_req("b3", "A", t0, "r3"sv), ew("k", 1, 4))};
  auto out = store().commit_batch(commits);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].ok()) << out[0].to_string();
  EXPECT_TRUE(out[1].ok()) << out[1].to_string();
  EXPECT_EQ(out[2].code(), StatusCode::kAborted) << out[2].to_string();
  EXPECT_TRUE(is_record(read(store(), "k"), 3, 3, "s"));
  EXPECT_EQ(claim_ok(keyed(claim_req("b1", "B", t0), "k")).status, ClaimStatus::kCompleted);
  EXPECT_EQ(claim_ok(keyed(claim_req("b2", "B", t0), "k")).status, ClaimStatus::kCompleted);
  EXPECT_EQ(inspect_live("b3", t0, "k"sv).state, RecordState::kInProgress) << "the aborted item wrote no dedup record";
}

// The write that fails first (a stale revision) and, behind it, one that expects the
// revision that is current now (as if another writer had produced it after the batch
// read the entity): with entity_chains the second stops with the first.
TEST_P(StoreConformance, EntityChainsStopAtTheirFirstFailure) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 1, "s"sv)).ok());
  std::vector<ClaimRequest> claims = {keyed(claim_req("x1", "A", t0), "k"), keyed(claim_req("x2", "A", t0), "k"),
                                      keyed(claim_req("y1", "A", t0), "j")};
  for (const auto& g : store().claim_batch(claims)) {
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ(g->status, ClaimStatus::kNew);
  }
  std::vector<CommitRequest> commits = {with_entity(commit_req("x1", "A", t0), ew("k", 0, 7)),
                                        with_entity(commit_req("x2", "A", t0), ew("k", 1, 8)),
                                        with_entity(commit_req("y1", "A", t0), ew("j", 0, 1))};
  auto out = store().commit_batch(commits);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].code(), StatusCode::kAborted) << out[0].to_string();
  EXPECT_TRUE(out[2].ok()) << out[2].to_string() << ": another key's chain is not affected";
  EXPECT_TRUE(is_record(read(store(), "j"), 1, 1, ""));
  if (store().capabilities().entity_chains) {
    EXPECT_EQ(out[1].code(), StatusCode::kAborted) << out[1].to_string();
    EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
    EXPECT_EQ(inspect_live("x2", t0, "k"sv).state, RecordState::kInProgress) << "the stopped item wrote nothing";
  } else {
    // Without the capability the second write is checked on its own (and lands): the
    // engine never sends such a chain to this store.
    EXPECT_TRUE(out[1].ok()) << out[1].to_string();
    EXPECT_TRUE(is_record(read(store(), "k"), 2, 8, "s"));
  }
}

TEST_P(StoreConformance, EntityTransactionalCommitHonoursTheWrite) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  if (!store().capabilities().transactional) {
    EXPECT_EQ(store().begin(t0).status().code(), StatusCode::kUnimplemented);
    return;
  }
  ASSERT_TRUE(claim_new("t1", "A", t0, std::nullopt, "k"sv));
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "t1", "one", t0)).ok());
  {
    auto tx = store().begin(t0);
    ASSERT_TRUE(tx.ok()) << tx.status().to_string();
    CommitRequest c = with_entity(commit_req("t1", "A", t0, "r"sv), ew("k", 0, 1, "s"sv, 1));
    ASSERT_TRUE((*tx)->commit(c).ok());
  }
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
  EXPECT_TRUE(buffered(store(), "k").empty());
  EXPECT_EQ(claim_ok(keyed(claim_req("t1", "B", t0), "k")).status, ClaimStatus::kCompleted);

  ASSERT_TRUE(claim_new("t2", "A", t0, std::nullopt, "k"sv));
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "t2", "two", t0)).ok());
  {
    auto tx = store().begin(t0);
    ASSERT_TRUE(tx.ok()) << tx.status().to_string();
    CommitRequest c = with_entity(commit_req("t2", "A", t0, "r"sv), ew("k", 0, 2, "t"sv, 2));
    EXPECT_EQ((*tx)->commit(c).code(), StatusCode::kAborted);
  }
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{2}));
  RecordInfo info = inspect_live("t2", t0, "k"sv);
  EXPECT_EQ(info.state, RecordState::kInProgress);
  EXPECT_EQ(info.owner, "A");
}

// --- the reorder buffer -------------------------------------------------------------

TEST_P(StoreConformance, EntityBufferReadsByAscendingVersion) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  EXPECT_TRUE(buffered(store(), "k").empty());
  const std::vector<std::uint64_t> order = {5, 2, 9, 3};
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string v = std::to_string(order[i]);
    ASSERT_TRUE(store().entities()->buffer_put(bp("k", order[i], "id-" + v, "msg\0"s + v, t0 + milliseconds(i))).ok());
  }
  const std::vector<BufferEntry> all = buffered(store(), "k", 10);
  ASSERT_EQ(versions(all), (std::vector<std::uint64_t>{2, 3, 5, 9}));
  const std::vector<std::size_t> put_index = {1, 3, 0, 2};  // when each was put
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string v = std::to_string(all[i].version);
    EXPECT_EQ(all[i].key, "k");
    EXPECT_EQ(all[i].id, "id-" + v);
    EXPECT_EQ(all[i].message, "msg\0"s + v);
    EXPECT_EQ(all[i].buffered_at, t0 + milliseconds(put_index[i]));
  }
  EXPECT_EQ(versions(buffered(store(), "k", 2)), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(versions(buffered(store(), "k", 1)), (std::vector<std::uint64_t>{2}));
  EXPECT_TRUE(buffered(store(), "k", 0).empty());
  EXPECT_TRUE(buffered(store(), "kk").empty());
  // Large versions sort as numbers.
  ASSERT_TRUE(store().entities()->buffer_put(bp("big", 1ull << 40, "x", "", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("big", 256, "y", "", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("big", 10, "z", "", t0)).ok());
  EXPECT_EQ(versions(buffered(store(), "big")), (std::vector<std::uint64_t>{10, 256, 1ull << 40}));
}

TEST_P(StoreConformance, EntityBufferPutIsIdempotentForTheSameId) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 4, "m4", "first", t0)).ok());
  Status same = store().entities()->buffer_put(bp("k", 4, "m4", "second", t0 + milliseconds(500)));
  EXPECT_TRUE(same.ok()) << same.to_string();
  std::vector<BufferEntry> e = buffered(store(), "k");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].buffered_at, t0) << "the first buffered_at is kept";
  EXPECT_EQ(e[0].message, "first") << "nothing changes";
  EXPECT_EQ(summary(store()).count, 1u);

  Status other = store().entities()->buffer_put(bp("k", 4, "not-m4", "x", t0));
  EXPECT_EQ(other.code(), StatusCode::kFailedPrecondition) << other.to_string();
  e = buffered(store(), "k");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].id, "m4");

  // A repeated put is not counted against the limits: it stores nothing.
  BufferLimits full{.per_key = 1, .total = 1, .total_bytes = entry_bytes("k", "m4", "first")};
  EXPECT_TRUE(store().entities()->buffer_put(bp("k", 4, "m4", "first", t0, full)).ok());
  EXPECT_EQ(summary(store()).count, 1u);
}

TEST_P(StoreConformance, EntityBufferPerKeyLimit) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  const BufferLimits limits{.per_key = 2, .total = 100, .total_bytes = 1 << 20};
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "m1", "a", t0, limits)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "m2", "b", t0, limits)).ok());
  Status over = store().entities()->buffer_put(bp("k", 3, "m3", "c", t0, limits));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.to_string();
  EXPECT_NE(over.message().find("per_key"), std::string::npos) << over.to_string();
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{1, 2})) << "nothing stored";
  BufferSummary sum = summary(store());
  EXPECT_EQ(sum.count, 2u);
  EXPECT_EQ(sum.bytes, 2 * entry_bytes("k", "m1", "a"));
  // The limit is per key.
  EXPECT_TRUE(store().entities()->buffer_put(bp("j", 3, "m3", "c", t0, limits)).ok());
  // Room made by a removal is usable again.
  ASSERT_TRUE(store().entities()->buffer_remove("k", 1).ok());
  EXPECT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "c", t0, limits)).ok());
}

// buffer_put_batch answers as one buffer_put per element, in order: a later put sees
// the earlier ones (their versions, the limits they use up).
TEST_P(StoreConformance, EntityBufferPutBatchAnswersAsOnePutPerElement) {
  if (!caps().entities) {
    expect_no_entities(store());
    return;
  }
  const TimePoint t0 = clock_.now();
  const BufferLimits limits{.per_key = 2, .total = 100, .total_bytes = 1 << 20};
  // The same sequence on keys k/j as one batch, and on keys k1/j1 one put at a time.
  auto sequence = [&](std::string_view k, std::string_view j) {
    return std::vector<BufferPut>{
        bp(k, 2, "m2", "two", t0, limits),    // stored
        bp(k, 2, "m2", "two", t0, limits),    // the same id again: OK, nothing stored
        bp(k, 2, "other", "x", t0, limits),   // another id holds version 2
        bp(k, 3, "", "x", t0, limits),        // no id
        bp(k, 3, "m3", "three", t0, limits),  // stored: the second entry of k
        bp(k, 4, "m4", "four", t0, limits),   // over per_key, counting the earlier puts
        bp(j, 9, "n9", "nine", t0, limits),   // stored: the limit is per key
    };
  };
  const auto batch = sequence("k", "j");
  const auto answers = store().entities()->buffer_put_batch(batch);
  ASSERT_EQ(answers.size(), batch.size());
  const StatusCode expected[] = {StatusCode::kOk,
                                 StatusCode::kOk,
                                 StatusCode::kFailedPrecondition,
                                 StatusCode::kInvalidArgument,
                                 StatusCode::kOk,
                                 StatusCode::kResourceExhausted,
                                 StatusCode::kOk};
  for (std::size_t i = 0; i < answers.size(); ++i)
    EXPECT_EQ(answers[i].code(), expected[i]) << i << " " << answers[i].to_string();
  const auto singles = sequence("k1", "j1");
  for (std::size_t i = 0; i < singles.size(); ++i)
    EXPECT_EQ(store().entities()->buffer_put(singles[i]).code(), answers[i].code()) << "put " << i << " alone";
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(buffered(store(), "k")[0].id, "m2");
  EXPECT_EQ(versions(buffered(store(), "j")), (std::vector<std::uint64_t>{9}));
  const BufferSummary sum = summary(store());
  EXPECT_EQ(sum.count, 6u);
  EXPECT_EQ(sum.bytes,
            2 * (entry_bytes("k", "m2", "two") + entry_bytes("k", "m3", "three") + entry_bytes("j", "n9", "nine")) +
                3 /* the "1" of k1, k1, j1 */);
}

// The total limits count the batch's own earlier puts, and what a batch stored is
// what a reopened durable store finds (entries and totals).
TEST_P(StoreConformance, EntityBufferPutBatchKeepsTheTotals) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  const std::size_t each = entry_bytes("a", "a1", "x");
  const BufferLimits limits{.per_key = 100, .total = 3, .total_bytes = 1 << 20};
  const BufferLimits bytes_limit{.per_key = 100, .total = 100, .total_bytes = 4 * each};
  const std::vector<BufferPut> batch = {
      bp("a", 1, "a1", "x", t0, limits),       // stored
      bp("b", 1, "b1", "x", t0, limits),       // stored
      bp("b", 2, "b2", "x", t0, limits),       // stored: the total is now 3
      bp("c", 1, "c1", "x", t0, limits),       // over total, counting the batch
      bp("d", 1, "d1", "x", t0, bytes_limit),  // stored: bytes 4 * each
      bp("e", 1, "e1", "x", t0, bytes_limit),  // over total_bytes
  };
  const auto answers = store().entities()->buffer_put_batch(batch);
  ASSERT_EQ(answers.size(), batch.size());
  const StatusCode expected[] = {StatusCode::kOk, StatusCode::kOk,
                                 StatusCode::kOk, StatusCode::kResourceExhausted,
                                 StatusCode::kOk, StatusCode::kResourceExhausted};
  for (std::size_t i = 0; i < answers.size(); ++i)
    EXPECT_EQ(answers[i].code(), expected[i]) << i << " " << answers[i].to_string();
  EXPECT_NE(answers[5].message().find("total_bytes"), std::string::npos) << answers[5].to_string();
  auto check = [&] {
    EXPECT_EQ(versions(buffered(store(), "b")), (std::vector<std::uint64_t>{1, 2}));
    EXPECT_TRUE(buffered(store(), "c").empty());
    EXPECT_TRUE(buffered(store(), "e").empty());
    const BufferSummary sum = summary(store());
    EXPECT_EQ(sum.count, 4u);
    EXPECT_EQ(sum.bytes, 4 * each);
  };
  check();
  if (!caps().durable) return;
  reopen();
  check();
}

TEST_P(StoreConformance, EntityBufferTotalLimit) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  const BufferLimits limits{.per_key = 100, .total = 3, .total_bytes = 1 << 20};
  ASSERT_TRUE(store().entities()->buffer_put(bp("a", 1, "a1", "x", t0, limits)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("b", 1, "b1", "x", t0, limits)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("b", 2, "b2", "x", t0, limits)).ok());
  Status over = store().entities()->buffer_put(bp("c", 1, "c1", "x", t0, limits));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.to_string();
  EXPECT_NE(over.message().find("total"), std::string::npos) << over.to_string();
  EXPECT_EQ(over.message().find("total_bytes"), std::string::npos) << "names the count limit: " << over.to_string();
  EXPECT_EQ(over.message().find("per_key"), std::string::npos) << over.to_string();
  EXPECT_TRUE(buffered(store(), "c").empty()) << "nothing stored";
  EXPECT_EQ(summary(store()).count, 3u);
  ASSERT_TRUE(store().entities()->buffer_remove("b", 2).ok());
  EXPECT_TRUE(store().entities()->buffer_put(bp("c", 1, "c1", "x", t0, limits)).ok());
  EXPECT_EQ(summary(store()).count, 3u);
}

TEST_P(StoreConformance, EntityBufferTotalBytesLimit) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  const std::string m1(100, 'a');
  const std::string m2(50, 'b');
  const std::size_t first = entry_bytes("k", "m1", m1);
  const std::size_t second = entry_bytes("other", "m2", m2);
  // Exactly full is allowed; one byte more is not.
  const BufferLimits limits{.per_key = 100, .total = 100, .total_bytes = first + second};
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "m1", m1, t0, limits)).ok());
  const BufferLimits tight{.per_key = 100, .total = 100, .total_bytes = first + second - 1};
  Status over = store().entities()->buffer_put(bp("other", 1, "m2", m2, t0, tight));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.to_string();
  EXPECT_NE(over.message().find("total_bytes"), std::string::npos) << over.to_string();
  EXPECT_TRUE(buffered(store(), "other").empty()) << "nothing stored";
  BufferSummary sum = summary(store());
  EXPECT_EQ(sum.count, 1u);
  EXPECT_EQ(sum.bytes, first);
  ASSERT_TRUE(store().entities()->buffer_put(bp("other", 1, "m2", m2, t0, limits)).ok());
  EXPECT_EQ(summary(store()).bytes, first + second);
  // Now any entry is one too many.
  Status full = store().entities()->buffer_put(bp("third", 1, "m", "", t0, limits));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.to_string();
  EXPECT_NE(full.message().find("total_bytes"), std::string::npos) << full.to_string();
}

TEST_P(StoreConformance, EntityBufferRemove) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 1, "m1", "a", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "m2", "b", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("j", 1, "j1", "c", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_remove("k", 1).ok());
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{2}));
  EXPECT_TRUE(store().entities()->buffer_remove("k", 1).ok()) << "removing an absent entry is OK";
  EXPECT_TRUE(store().entities()->buffer_remove("never-used", 7).ok());
  EXPECT_EQ(versions(buffered(store(), "j")), (std::vector<std::uint64_t>{1}));
  ASSERT_TRUE(store().entities()->buffer_remove("k", 2).ok());
  EXPECT_TRUE(buffered(store(), "k").empty());
  BufferSummary sum = summary(store());
  EXPECT_EQ(sum.count, 1u);
  EXPECT_EQ(sum.bytes, entry_bytes("j", "j1", "c"));
  ASSERT_EQ(sum.keys.size(), 1u) << "a key whose last entry went has no summary line";
  EXPECT_EQ(sum.keys[0].key, "j");
  // A removed (key, version) can take a new id.
  EXPECT_TRUE(store().entities()->buffer_put(bp("k", 1, "another", "z", t0)).ok());
  EXPECT_EQ(buffered(store(), "k").at(0).id, "another");
}

TEST_P(StoreConformance, EntityBufferSummaryTotalsAndOldestFirst) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  BufferSummary empty = summary(store());
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_TRUE(empty.keys.empty());

  // b's oldest entry is not its lowest version.
  ASSERT_TRUE(store().entities()->buffer_put(bp("a", 7, "a7", "xx", t0 + milliseconds(20))).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("b", 9, "b9", "y", t0 + milliseconds(10))).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("b", 4, "b4", "yyy", t0 + milliseconds(50))).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("c", 2, "c2", "", t0 + milliseconds(30))).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("d", 3, "d3", "z", t0 + milliseconds(40))).ok());
  const std::size_t bytes = entry_bytes("a", "a7", "xx") + entry_bytes("b", "b9", "y") + entry_bytes("b", "b4", "yyy") +
                            entry_bytes("c", "c2", "") + entry_bytes("d", "d3", "z");

  BufferSummary all = summary(store(), 10);
  EXPECT_EQ(all.count, 5u);
  EXPECT_EQ(all.bytes, bytes);
  ASSERT_EQ(all.keys.size(), 4u);
  EXPECT_EQ(all.keys[0].key, "b");
  EXPECT_EQ(all.keys[0].count, 2u);
  EXPECT_EQ(all.keys[0].lowest_version, 4u);
  EXPECT_EQ(all.keys[0].oldest_at, t0 + milliseconds(10));
  EXPECT_EQ(all.keys[1].key, "a");
  EXPECT_EQ(all.keys[1].count, 1u);
  EXPECT_EQ(all.keys[1].lowest_version, 7u);
  EXPECT_EQ(all.keys[1].oldest_at, t0 + milliseconds(20));
  EXPECT_EQ(all.keys[2].key, "c");
  EXPECT_EQ(all.keys[3].key, "d");
  EXPECT_EQ(all.keys[3].oldest_at, t0 + milliseconds(40));

  // max_keys bounds the list, not the totals.
  BufferSummary two = summary(store(), 2);
  EXPECT_EQ(two.count, 5u);
  EXPECT_EQ(two.bytes, bytes);
  ASSERT_EQ(two.keys.size(), 2u);
  EXPECT_EQ(two.keys[0].key, "b");
  EXPECT_EQ(two.keys[1].key, "a");
  BufferSummary none = summary(store(), 0);
  EXPECT_EQ(none.count, 5u);
  EXPECT_TRUE(none.keys.empty());

  // Removing b's oldest entry moves b behind the others.
  ASSERT_TRUE(store().entities()->buffer_remove("b", 9).ok());
  BufferSummary after = summary(store(), 10);
  EXPECT_EQ(after.count, 4u);
  ASSERT_EQ(after.keys.size(), 4u);
  EXPECT_EQ(after.keys[0].key, "a");
  EXPECT_EQ(after.keys[3].key, "b");
  EXPECT_EQ(after.keys[3].oldest_at, t0 + milliseconds(50));
  EXPECT_EQ(after.keys[3].lowest_version, 4u);
}

// --- bytes, expiry, durability --------------------------------------------------------

TEST_P(StoreConformance, EntityBinaryKeysIdsAndLongKeys) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  std::string long_key(512, 'x');
  for (std::size_t i = 0; i < long_key.size(); ++i) long_key[i] = static_cast<char>(i % 256);
  const std::vector<std::string> keys = {
      "a"s, "\0"s, "a\0b"s, "a\0c"s, "a\0"s, "\xff\xfe\x80"s, "\xc3\x28"s, long_key, long_key.substr(0, 511)};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(store().entities()->write_entity(ew(keys[i], 0, i + 1, "st\0"s + std::to_string(i))).ok()) << i;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE(is_record(read(store(), keys[i]), 1, i + 1, "st\0"s + std::to_string(i)));
  }
  EXPECT_TRUE(is_record(read(store(), "a\0d"s), 0, 0, ""));

  // Buffer entries with binary keys, ids and messages round-trip exactly.
  const std::string id = "\0id\xff"s;
  const std::string message = "\0\x01\xfe"s + std::string(1000, '\0');
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(store().entities()->buffer_put(bp(keys[i], 2, id + std::to_string(i), message, t0 + milliseconds(i))).ok()) << i;
  }
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::vector<BufferEntry> e = buffered(store(), keys[i]);
    ASSERT_EQ(e.size(), 1u) << i;
    EXPECT_EQ(e[0].key, keys[i]) << i;
    EXPECT_EQ(e[0].id, id + std::to_string(i)) << i;
    EXPECT_EQ(e[0].message, message) << i;
    bytes += e[0].bytes();
  }
  BufferSummary sum = summary(store(), keys.size());
  EXPECT_EQ(sum.count, keys.size());
  EXPECT_EQ(sum.bytes, bytes);
  ASSERT_EQ(sum.keys.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(sum.keys[i].key, keys[i]) << i;

  // Claim and commit with a binary entity key.
  const std::string binary_id = "\0m\xff"s;
  ClaimRequest q = claim_req(binary_id, "A", t0);
  q.entity_key = keys[2];
  ClaimResult c = claim_ok(q);
  ASSERT_EQ(c.status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c.entity, 1, 3, "st\0"s + "2"));
  CommitRequest commit = with_entity(commit_req(binary_id, "A", t0), ew(keys[2], 1, 3, std::nullopt, 2));
  ASSERT_TRUE(store().commit(commit).ok());
  EXPECT_TRUE(is_record(read(store(), keys[2]), 2, 3, "st\0"s + "2"));
  EXPECT_TRUE(buffered(store(), keys[2]).empty());
  EXPECT_EQ(buffered(store(), keys[3]).size(), 1u);
  EXPECT_EQ(buffered(store(), keys[4]).size(), 1u);
}

TEST_P(StoreConformance, EntityRecordsAndBufferSurvivePurge) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(claim_new("m", "A", t0, std::nullopt, "k"sv));
  CommitRequest c = with_entity(commit_req("m", "A", t0), ew("k", 0, 1, "s"sv));
  c.ttl = milliseconds(1000);
  ASSERT_TRUE(store().commit(c).ok());
  ASSERT_TRUE(store().entities()->write_entity(ew("w", 0, 5)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "three", t0)).ok());

  const TimePoint years = t0 + std::chrono::hours(24 * 365 * 10);
  for (int round = 0; round < 20; ++round) {
    auto n = store().purge_expired(years, 1000);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    if (*n == 0) break;
  }
  EXPECT_TRUE(claim_new("m", "B", years, std::nullopt, "k"sv)) << "the dedup record did expire";
  EXPECT_TRUE(is_record(read(store(), "k"), 1, 1, "s"));
  EXPECT_TRUE(is_record(read(store(), "w"), 1, 5, ""));
  std::vector<BufferEntry> e = buffered(store(), "k");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].id, "m3");
  EXPECT_EQ(e[0].buffered_at, t0);
  EXPECT_EQ(summary(store()).count, 1u);
  ClaimRequest q = claim_req("m2", "A", years);
  q.entity_key = "k";
  EXPECT_TRUE(is_record(claim_ok(q).entity, 1, 1, "s"));
}

TEST_P(StoreConformance, EntityReopenKeepsRecordsAndBufferOfDurableStores) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 2, "m2", "two", t0)).ok());
  ASSERT_TRUE(store().entities()->buffer_put(bp("k", 3, "m3", "three\0"s, t0 + milliseconds(1))).ok());
  ASSERT_TRUE(claim_new("m2", "A", t0, std::nullopt, "k"sv));
  CommitRequest c = with_entity(commit_req("m2", "A", t0, "r2"sv), ew("k", 0, 2, "s2"sv, 2));
  ASSERT_TRUE(store().commit(c).ok());
  ASSERT_TRUE(store().entities()->write_entity(ew("w", 0, std::nullopt, "only-state"sv)).ok());

  reopen();
  if (caps().durable) {
    EXPECT_TRUE(is_record(read(store(), "k"), 1, 2, "s2"));
    EXPECT_TRUE(is_record(read(store(), "w"), 1, 0, "only-state"));
    std::vector<BufferEntry> e = buffered(store(), "k");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].version, 3u);
    EXPECT_EQ(e[0].id, "m3");
    EXPECT_EQ(e[0].message, "three\0"s);
    EXPECT_EQ(e[0].buffered_at, t0 + milliseconds(1));
    EXPECT_EQ(claim_ok(keyed(claim_req("m2", "B", t0), "k")).result, std::optional<std::string>("r2"));
    BufferSummary sum = summary(store());
    EXPECT_EQ(sum.count, 1u);
    EXPECT_EQ(sum.bytes, entry_bytes("k", "m3", "three\0"sv));
    // The revision carries on from the stored one.
    EXPECT_EQ(store().entities()->write_entity(ew("k", 0, 9)).code(), StatusCode::kAborted);
    ASSERT_TRUE(store().entities()->write_entity(ew("k", 1, 3, std::nullopt, 3)).ok());
    reopen();
    EXPECT_TRUE(is_record(read(store(), "k"), 2, 3, "s2"));
    EXPECT_TRUE(buffered(store(), "k").empty());
  } else {
    // Not durable: only the reopened store's behaviour is checked.
    const EntityRecord r = read(store(), "fresh-after-reopen");
    EXPECT_TRUE(is_record(r, 0, 0, ""));
    EXPECT_TRUE(store().entities()->write_entity(ew("fresh-after-reopen", 0, 1)).ok());
    EXPECT_TRUE(is_record(read(store(), "fresh-after-reopen"), 1, 1, ""));
  }
}

// --- atomicity under faults -----------------------------------------------------------

TEST_P(StoreConformance, EntityFaultInsideACommitLeavesEverythingUnchanged) {
  if (!caps().entities) return expect_no_entities(store());
  const TimePoint t0 = clock_.now();
  if (!caps().fault_hook) {
    // Without a hook, what can be checked is that a refused commit changes nothing
    // (EntityRevisionMismatchAbortsTheCommitAndWritesNothing) and why there is none.
    EXPECT_FALSE(caps().no_fault_hook_reason.empty());
    return;
  }
  // Learn the points a commit with an entity write passes.
  ASSERT_TRUE(claim_new("probe", "A", t0, std::nullopt, "probe-key"sv));
  ASSERT_TRUE(store().entities()->buffer_put(bp("probe-key", 1, "probe", "p", t0)).ok());
  faults_.clear_seen();
  CommitRequest probe = with_entity(commit_req("probe", "A", t0, "p"sv), ew("probe-key", 0, 1, "s"sv, 1));
  ASSERT_TRUE(store().commit(probe).ok());
  const std::vector<std::string> points = faults_.seen();
  ASSERT_FALSE(points.empty()) << "the factory says the backend calls its fault hook inside commit";

  int n = 0;
  for (const std::string& point : points) {
    SCOPED_TRACE("fault at " + point);
    const std::string id = "atomic-" + std::to_string(n);
    const std::string key = "key-" + std::to_string(n++);
    faults_.fail_at({});
    ASSERT_TRUE(store().entities()->write_entity(ew(key, 0, 1, "before"sv)).ok());
    ASSERT_TRUE(store().entities()->buffer_put(bp(key, 2, id, "two", t0)).ok());
    ASSERT_TRUE(claim_new(id, "A", t0, std::nullopt, key));
    ASSERT_TRUE(store().release(keyed(release_req(id, "A", t0, true), key)).ok());
    ASSERT_EQ(claim_ok(keyed(claim_req(id, "A", t0), key)).retries, 1u);

    CommitRequest c = with_entity(commit_req(id, "A", t0, "must not land"sv), ew(key, 1, 2, "after"sv, 2));
    faults_.fail_at(point);
    Status s = store().commit(c);
    faults_.fail_at({});
    EXPECT_FALSE(s.ok()) << "the commit must report the injected failure";

    EXPECT_TRUE(is_record(read(store(), key), 1, 1, "before"));
    EXPECT_EQ(versions(buffered(store(), key)), (std::vector<std::uint64_t>{2}));
    auto after = inspect(id, t0, key);
    ASSERT_TRUE(after.ok());
    ASSERT_TRUE(after->has_value());
    EXPECT_NE((*after)->state, RecordState::kCompleted);
    EXPECT_NE((*after)->state, RecordState::kDeadLettered);
    EXPECT_EQ((*after)->retries, 1u);
    EXPECT_FALSE((*after)->result.has_value());

    // With the fault gone, the owner's commit goes through, all of it.
    c.result = "landed";
    ASSERT_TRUE(store().commit(c).ok());
    EXPECT_TRUE(is_record(read(store(), key), 2, 2, "after"));
    EXPECT_TRUE(buffered(store(), key).empty());
    EXPECT_EQ(claim_ok(keyed(claim_req(id, "B", t0), key)).result, std::optional<std::string>("landed"));
  }
  if (caps().durable) {
    // A failed commit is not found after a reopen either, in any of its parts.
    ASSERT_TRUE(claim_new("durable-atomic", "A", t0, std::nullopt, "durable-key"sv));
    ASSERT_TRUE(store().entities()->buffer_put(bp("durable-key", 1, "durable-atomic", "x", t0)).ok());
    CommitRequest c = with_entity(commit_req("durable-atomic", "A", t0, "no"sv), ew("durable-key", 0, 1, "s"sv, 1));
    faults_.fail_at(points.back());
    EXPECT_FALSE(store().commit(c).ok());
    faults_.fail_at({});
    reopen();
    EXPECT_TRUE(is_record(read(store(), "durable-key"), 0, 0, ""));
    EXPECT_EQ(versions(buffered(store(), "durable-key")), (std::vector<std::uint64_t>{1}));
    auto after = inspect("durable-atomic", t0, "durable-key"sv);
    ASSERT_TRUE(after.ok());
    EXPECT_TRUE(!after->has_value() || ((*after)->state != RecordState::kCompleted && !(*after)->result));
  }
}

// --- sharing and concurrency ------------------------------------------------------------

TEST_P(StoreConformance, EntitySharedHandlesSeeEachOthersEntities) {
  if (!caps().entities) return expect_no_entities(store());
  if (!caps().shared) {
    EXPECT_FALSE(store().capabilities().shared);
    return;
  }
  const TimePoint t0 = clock_.now();
  std::shared_ptr<Store> second = open_second();
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 0, 1, "s"sv)).ok());
  EXPECT_TRUE(is_record(read(*second, "k"), 1, 1, "s"));
  ASSERT_TRUE(second->entities()->buffer_put(bp("k", 3, "m3", "three", t0)).ok());
  EXPECT_EQ(versions(buffered(store(), "k")), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(summary(store()).count, 1u);

  ClaimRequest q = claim_req("m2", "A", t0);
  q.entity_key = "k";
  auto c = second->claim(q);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->status, ClaimStatus::kNew);
  EXPECT_TRUE(is_record(c->entity, 1, 1, "s"));

  // Both handles read revision 1; only the first write lands.
  ASSERT_TRUE(store().entities()->write_entity(ew("k", 1, 2)).ok());
  CommitRequest late = with_entity(commit_req("m2", "A", t0), ew("k", 1, 2, std::nullopt, 3));
  EXPECT_EQ(second->commit(late).code(), StatusCode::kAborted);
  late.entity->expect_revision = 2;
  ASSERT_TRUE(second->commit(late).ok());
  EXPECT_TRUE(is_record(read(store(), "k"), 3, 2, "s"));
  EXPECT_TRUE(buffered(store(), "k").empty());
}

TEST_P(StoreConformance, EntityConcurrentCompareAndSetEachRevisionWonOnce) {
  if (!caps().entities) return expect_no_entities(store());
  constexpr int kThreads = 8;
  constexpr int kAttempts = 40;
  const TimePoint t0 = clock_.now();
  std::vector<std::atomic<int>> won(kThreads * kAttempts + 2);
  std::atomic<int> wins{0};
  std::atomic<int> errors{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string owner = "owner-" + std::to_string(t);
      sync.arrive_and_wait();
      for (int i = 0; i < kAttempts; ++i) {
        const std::string id = "cas-" + std::to_string(t) + "-" + std::to_string(i);
        auto granted = store_->claim({id, owner, kLease, std::nullopt, t0, "hot"sv});
        auto before = store_->entities()->read_entity("hot");
        if (!granted.ok() || granted->status != ClaimStatus::kNew || !before.ok()) {
          errors.fetch_add(1);
          continue;
        }
        CommitRequest c;
        c.id = id;
        c.owner = owner;
        c.now = t0;
        c.ttl = kTtl;
        c.entity = ew("hot", before->revision, before->revision + 1);
        c.entity_key = "hot"sv;
        Status s = store_->commit(c);
        if (s.ok()) {
          const std::uint64_t rev = before->revision + 1;
          if (rev < won.size()) won[rev].fetch_add(1);
          wins.fetch_add(1);
        } else if (s.code() == StatusCode::kAborted) {
          if (!store_->release({id, owner, false, t0, kRetryTtl, "hot"sv}).ok()) errors.fetch_add(1);
        } else {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const EntityRecord final_record = read(store(), "hot");
  EXPECT_EQ(final_record.revision, static_cast<std::uint64_t>(wins.load()));
  EXPECT_EQ(final_record.version, final_record.revision);
  EXPECT_GE(wins.load(), kAttempts) << "at least one thread's writes cannot all lose";
  for (std::uint64_t r = 1; r <= final_record.revision && r < won.size(); ++r) {
    EXPECT_EQ(won[r].load(), 1) << "revision " << r;
  }
  for (std::uint64_t r = final_record.revision + 1; r < won.size(); ++r) EXPECT_EQ(won[r].load(), 0) << r;
}

}  // namespace idem::conformance
