// Bad input against a real server: credentials, foreign keys at store keys, corrupt
// records, lost scripts, odd ids. Clear errors; nothing lost; other ids unaffected.
#include <chrono>

#include "test_util.hpp"

namespace idem::redis_test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

class RedisBadInput : public WithRedisServer {
 protected:
  ClaimRequest claim(std::string_view id, std::string_view owner) const {
    return ClaimRequest{id, owner, Duration(10'000), std::nullopt, t0_, std::nullopt};
  }
  CommitRequest commit(std::string_view id, std::string_view owner) const {
    CommitRequest c;
    c.id = id;
    c.owner = owner;
    c.now = t0_;
    c.ttl = Duration(3'600'000);
    return c;
  }
  // Every call on `id` fails with `code`, and a healthy id still works.
  void expect_every_call_fails(const std::string& id, StatusCode code, const std::string& words) {
    auto c = store_->claim(claim(id, "A"));
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
    EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().to_string();
    EXPECT_EQ(store_->commit(commit(id, "A")).code(), code);
    EXPECT_EQ(store_->release({id, "A", true, t0_, Duration(1000), std::nullopt}).status().code(), code);
    EXPECT_EQ(store_->extend({id, "A", Duration(1000), t0_, std::nullopt}).code(), code);
    EXPECT_EQ(store_->inspect(id, t0_).status().code(), code);
    auto batch = store_->claim_batch(std::vector<ClaimRequest>{claim("healthy-" + id, "A"), claim(id, "A")});
    ASSERT_TRUE(batch[0].ok()) << batch[0].status().to_string();
    EXPECT_EQ(batch[0]->status, ClaimStatus::kNew) << "one bad key fails only its own element";
    EXPECT_EQ(batch[1].status().code(), code);
    // The batch commit (one commit_many script on a standalone server) as well.
    ASSERT_EQ(store_->claim(claim("healthy-2-" + id, "A"))->status, ClaimStatus::kNew);
    auto commits = store_->commit_batch(
        std::vector<CommitRequest>{commit("healthy-" + id, "A"), commit(id, "A"), commit("healthy-2-" + id, "A")});
    EXPECT_TRUE(commits[0].ok()) << commits[0].to_string();
    EXPECT_EQ(commits[1].code(), code) << commits[1].to_string();
    EXPECT_NE(commits[1].message().find(words), std::string::npos) << commits[1].to_string();
    EXPECT_TRUE(commits[2].ok()) << commits[2].to_string();
  }

  TimePoint t0_ = ManualClock().now();
};

TEST_F(RedisBadInput, AKeyOfTheWrongTypeIsDataLossForThatIdOnly) {
  ASSERT_TRUE(server_->command({"HSET", key_of(*store_, "hash"), "field", "value"}).ok());
  expect_every_call_fails("hash", StatusCode::kDataLoss, "wrong type");
  auto still = server_->command({"HGET", key_of(*store_, "hash"), "field"});
  EXPECT_EQ(still->str, "value") << "the foreign value is left alone";
}

TEST_F(RedisBadInput, AForeignStringOrAnUnknownStateIsDataLossAndIsLeftAsItWas) {
  ASSERT_TRUE(server_->command({"SET", key_of(*store_, "str"), "not a record"}).ok());
  expect_every_call_fails("str", StatusCode::kDataLoss, "not an idem record");
  auto still = server_->command({"GET", key_of(*store_, "str")});
  EXPECT_EQ(still->str, "not a record") << "a commit that found a foreign value put it back";
  ASSERT_TRUE(server_
                  ->command({"EVAL", "return redis.call('SET', KEYS[1], cmsgpack.pack({'z', '', 0, 1e15, 0}))", "1",
                             key_of(*store_, "state")})
                  .ok());
  expect_every_call_fails("state", StatusCode::kDataLoss, "unknown record state");
}

TEST_F(RedisBadInput, CommitThenClaimWithOneBadKeyAnswersTheOtherCall) {
  ASSERT_TRUE(server_->command({"SET", key_of(*store_, "bad"), "x"}).ok());
  ASSERT_EQ(store_->claim(claim("good", "A"))->status, ClaimStatus::kNew);
  auto r = store_->commit_then_claim(commit("good", "A"), claim("bad", "A"));
  EXPECT_TRUE(r.commit.ok()) << r.commit.to_string();
  EXPECT_EQ(r.claim.status().code(), StatusCode::kDataLoss);
  auto r2 = store_->commit_then_claim(commit("bad", "A"), claim("good2", "A"));
  EXPECT_EQ(r2.commit.code(), StatusCode::kDataLoss);
  ASSERT_TRUE(r2.claim.ok());
  EXPECT_EQ(r2.claim->status, ClaimStatus::kNew);
}

TEST_F(RedisBadInput, ScriptsFlushedFromTheServerAreSentAgain) {
  ASSERT_EQ(store_->claim(claim("a", "A"))->status, ClaimStatus::kNew);
  ASSERT_TRUE(server_->command({"SCRIPT", "FLUSH"}).ok());
  EXPECT_TRUE(store_->commit(commit("a", "A")).ok()) << "NOSCRIPT → EVAL";
  ASSERT_TRUE(server_->command({"SCRIPT", "FLUSH"}).ok());
  auto batch = store_->claim_batch(std::vector<ClaimRequest>{claim("a", "B"), claim("b", "B"), claim("c", "B")});
  ASSERT_TRUE(batch[0].ok()) << batch[0].status().to_string();
  EXPECT_EQ(batch[0]->status, ClaimStatus::kCompleted);
  EXPECT_EQ(batch[2]->status, ClaimStatus::kNew);
  ASSERT_TRUE(server_->command({"SCRIPT", "FLUSH"}).ok());
  auto commits = store_->commit_batch(std::vector<CommitRequest>{commit("b", "B"), commit("c", "B")});
  for (const Status& s : commits) EXPECT_TRUE(s.ok()) << s.to_string() << " (NOSCRIPT → EVAL in a batch)";
  EXPECT_EQ(store_->claim(claim("c", "C"))->status, ClaimStatus::kCompleted);
}

TEST_F(RedisBadInput, IdsOfOneByteTheMaximumLengthAndBinaryBytes) {
  std::string big(1 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) % 256);
  const std::vector<std::string> ids = {"x"s,      "\0"s, std::string(512, 'm'), big, "{tag}"s, "}"s, "{"s, "a}b{c"s,
                                        "\r\n*1"s, "%s"s};
  for (const auto& id : ids) {
    auto c = store_->claim(claim(id, "A"));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->status, ClaimStatus::kNew) << id.size();
  }
  for (const auto& id : ids) ASSERT_TRUE(store_->commit(commit(id, "A")).ok());
  for (const auto& id : ids) EXPECT_EQ(store_->claim(claim(id, "B"))->status, ClaimStatus::kCompleted) << id.size();
  auto dbsize = server_->command({"DBSIZE"});
  EXPECT_EQ(dbsize->integer, static_cast<std::int64_t>(ids.size())) << "one key per id, no collisions";
  auto empty = store_->claim(claim("", "A"));
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
}

TEST(RedisAuth, PasswordsAndAclUsers) {
  ServerConfig cfg;
  cfg.password = "s3cret";
  auto server = RedisServer::start(cfg);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string port = std::to_string((*server)->port());
  const TimePoint t0 = ManualClock().now();

  auto good = open_store_uri("redis://:s3cret@127.0.0.1:" + port);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ((*good)->claim({"a", "A", Duration(1000), std::nullopt, t0, std::nullopt})->status, ClaimStatus::kNew);

  auto wrong = open_store_uri("redis://:nope@127.0.0.1:" + port);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kFailedPrecondition) << wrong.status().to_string();
  EXPECT_NE(wrong.status().message().find("authentication"), std::string::npos) << wrong.status().to_string();

  auto none = open_store_uri("redis://127.0.0.1:" + port);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition) << none.status().to_string();
  EXPECT_NE(none.status().message().find("NOAUTH"), std::string::npos) << none.status().to_string();

  ASSERT_TRUE((*server)->command({"ACL", "SETUSER", "alice", "on", ">alice-pw", "~*", "+@all"}).ok());
  auto alice = open_store_uri("redis://alice:alice-pw@127.0.0.1:" + port);
  ASSERT_TRUE(alice.ok()) << alice.status().to_string();
  EXPECT_EQ((*alice)->claim({"a", "B", Duration(1000), std::nullopt, t0, std::nullopt})->status,
            ClaimStatus::kInProgress);
  auto bad_user = open_store_uri("redis://alice:wrong@127.0.0.1:" + port);
  EXPECT_EQ(bad_user.status().code(), StatusCode::kFailedPrecondition);

  // A user without the right to run scripts: a clear error at open.
  ASSERT_TRUE((*server)->command({"ACL", "SETUSER", "bob", "on", ">bob-pw", "~*", "+@all", "-@scripting"}).ok());
  auto bob = open_store_uri("redis://bob:bob-pw@127.0.0.1:" + port);
  ASSERT_FALSE(bob.ok());
  EXPECT_NE(bob.status().message().find("NOPERM"), std::string::npos) << bob.status().to_string();
}

}  // namespace
}  // namespace idem::redis_test
