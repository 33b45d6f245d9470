// The request checks every store makes (idem/backend/request_checks.hpp), the claim
// decision and the entity-chain rule of commit_batch.
#include "idem/backend/request_checks.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace idem {
namespace {

using std::chrono::milliseconds;

void expect_refused(const Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.message(), message);
}

TEST(RequestChecks, ClaimCommitReleaseExtend) {
  const ClaimRequest claim{"id", "o", milliseconds(1)};
  EXPECT_TRUE(check_claim(claim).ok());
  ClaimRequest q = claim;
  q.id = "";
  expect_refused(check_claim(q), "claim: empty id");
  q = claim;
  q.lease = milliseconds(0);
  expect_refused(check_claim(q), "claim: lease must be > 0");
  q = claim;
  q.entity_key = "";
  expect_refused(check_claim(q), "claim: empty entity key");

  CommitRequest commit{"id", "o"};
  commit.ttl = milliseconds(1);
  EXPECT_TRUE(check_commit(commit).ok());
  CommitRequest c = commit;
  c.id = "";
  expect_refused(check_commit(c), "commit: empty id");
  c = commit;
  c.ttl = milliseconds(0);
  expect_refused(check_commit(c), "commit: ttl must be > 0");
  c = commit;
  c.entity = EntityWrite{.key = ""};
  expect_refused(check_commit(c), "commit: empty entity key");
  c.entity = EntityWrite{.key = "k", .state = ""};
  expect_refused(check_commit(c), "commit: the entity state is set but empty");
  c.entity = EntityWrite{.key = "k", .state = "s"};
  EXPECT_TRUE(check_commit(c).ok());

  ReleaseRequest release{"id", "o"};
  EXPECT_TRUE(check_release(release).ok()) << "no retry counted: retry_ttl is not used";
  release.count_retry = true;
  expect_refused(check_release(release), "release: retry_ttl must be > 0");
  release.retry_ttl = milliseconds(1);
  EXPECT_TRUE(check_release(release).ok());
  release.entity_key = "";
  expect_refused(check_release(release), "release: empty entity key");
  release.entity_key.reset();
  release.id = "";
  expect_refused(check_release(release), "release: empty id");

  ExtendRequest extend{"id", "o", milliseconds(1)};
  EXPECT_TRUE(check_extend(extend).ok());
  extend.lease = milliseconds(0);
  expect_refused(check_extend(extend), "extend: lease must be > 0");
  extend.lease = milliseconds(1);
  extend.entity_key = "";
  expect_refused(check_extend(extend), "extend: empty entity key");
  extend.entity_key.reset();
  extend.id = "";
  expect_refused(check_extend(extend), "extend: empty id");
}

TEST(RequestChecks, EntityRequests) {
  EXPECT_TRUE(check_entity_key("k", "read_entity").ok());
  expect_refused(check_entity_key("", "buffer_read"), "buffer_read: empty entity key");
  expect_refused(check_entity_write({.key = ""}, "write_entity"), "write_entity: empty entity key");
  const BufferPut put{"k", 1, "m"};
  EXPECT_TRUE(check_buffer_put(put).ok());
  BufferPut p = put;
  p.key = "";
  expect_refused(check_buffer_put(p), "buffer_put: empty entity key");
  p = put;
  p.version = 0;
  expect_refused(check_buffer_put(p), "buffer_put: version must be > 0");
  p = put;
  p.id = "";
  expect_refused(check_buffer_put(p), "buffer_put: empty id");
}

TEST(ClaimDecision, ADoneRecordWinsThenALeaseThenAGrant) {
  ClaimRequest q{"id", "me", milliseconds(100)};
  q.fingerprint = 7;
  const HeldRecord done{7, std::string_view("r"), true};
  const HeldLease lease{7, "other", 1'250};
  EXPECT_FALSE(answer_held(q, 1'000, nullptr, nullptr).has_value());  // granted
  const auto completed = answer_held(q, 1'000, &done, &lease);
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(completed->status, ClaimStatus::kCompleted);
  EXPECT_EQ(completed->result, std::optional<std::string>("r"));
  EXPECT_TRUE(completed->dead_lettered);
  const auto leased = answer_held(q, 1'000, nullptr, &lease);
  ASSERT_TRUE(leased.has_value());
  EXPECT_EQ(leased->status, ClaimStatus::kInProgress);
  EXPECT_EQ(leased->owner, "other");
  EXPECT_EQ(leased->lease_left, milliseconds(250));
}

TEST(ClaimDecision, AFingerprintConflictsOnlyWhenBothAreSetAndDiffer) {
  ClaimRequest q{"id", "me", milliseconds(100)};
  const HeldRecord done{7, std::nullopt, false};
  const HeldLease lease{7, "other", 2'000};
  q.fingerprint = 8;
  EXPECT_EQ(answer_held(q, 1'000, &done, nullptr)->status, ClaimStatus::kConflict);
  EXPECT_EQ(answer_held(q, 1'000, nullptr, &lease)->status, ClaimStatus::kConflict);
  q.fingerprint.reset();
  EXPECT_EQ(answer_held(q, 1'000, &done, nullptr)->status, ClaimStatus::kCompleted);
  const HeldLease unmarked{std::nullopt, "other", 2'000};
  q.fingerprint = 8;
  EXPECT_EQ(answer_held(q, 1'000, nullptr, &unmarked)->status, ClaimStatus::kInProgress);
}

TEST(EntityChains, AFailureStopsItsKeysChainOnly) {
  auto with_key = [](std::string_view id, std::string_view key) {
    CommitRequest c{id, "o"};
    c.entity = EntityWrite{.key = key};
    return c;
  };
  const CommitRequest a1 = with_key("a1", "a"), a2 = with_key("a2", "a"), b1 = with_key("b1", "b");
  const CommitRequest plain{"p", "o"};
  EntityChains chains;
  EXPECT_TRUE(chains.check(a1).ok());
  chains.note(a1, ok_status());
  EXPECT_TRUE(chains.check(a2).ok()) << "a success keeps the chain going";
  chains.note(a2, aborted("revision moved"));
  EXPECT_EQ(chains.check(with_key("a3", "a")).code(), StatusCode::kAborted);
  EXPECT_TRUE(chains.check(b1).ok()) << "other keys go on";
  chains.note(plain, failed_precondition("lease lost"));
  EXPECT_TRUE(chains.check(plain).ok()) << "a request without an entity write has no chain";
  chains.stop(b1);
  EXPECT_EQ(chains.check(with_key("b2", "b")).code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace idem
