// StoreWrapper forwards every virtual method of Store to the same method of its target,
// with the same arguments, and returns the target's answer unchanged.
#include "idem/store_wrapper.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace idem {
namespace {

// Records which of its methods was called, with the id or key it was given, and
// answers each with a status naming the method.
class RecordingStore final : public Store {
 public:
  std::vector<std::string> calls;

  StoreCapabilities capabilities() const override {
    StoreCapabilities c;
    c.entities = true;
    c.combined_commit_claim = true;
    c.false_positive_rate = 0.25;
    return c;
  }
  StatusOr<ClaimResult> claim(const ClaimRequest& r) override { return record("claim", r.id); }
  Status commit(const CommitRequest& r) override { return record("commit", r.id); }
  StatusOr<std::uint32_t> release(const ReleaseRequest& r) override { return record("release", r.id); }
  Status extend(const ExtendRequest& r) override { return record("extend", r.id); }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint) override { return record("inspect", id); }
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> r) override {
    return {record("claim_batch", r[0].id)};
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> r) override {
    return {record("commit_batch", r[0].id)};
  }
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    return {record("commit_then_claim", c.id), record("commit_then_claim.claim", q.id)};
  }
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint) override { return record("begin", ""); }
  StatusOr<std::unique_ptr<BatchTransaction>> begin_batch(TimePoint) override { return record("begin_batch", ""); }
  StatusOr<EntityRecord> read_entity(std::string_view key) override { return record("read_entity", key); }
  Status write_entity(const EntityWrite& w) override { return record("write_entity", w.key); }
  Status buffer_put(const BufferPut& p) override { return record("buffer_put", p.key); }
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> p) override {
    return {record("buffer_put_batch", p[0].key)};
  }
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t) override {
    return record("buffer_read", key);
  }
  Status buffer_remove(std::string_view key, std::uint64_t) override { return record("buffer_remove", key); }
  StatusOr<BufferSummary> buffer_summary(std::size_t) override { return record("buffer_summary", ""); }
  StatusOr<std::size_t> purge_expired(TimePoint, std::size_t) override { return record("purge_expired", ""); }

 private:
  Status record(std::string method, std::string_view arg) {
    calls.push_back(method + "(" + std::string(arg) + ")");
    return unavailable(method);
  }
};

TEST(StoreWrapper, ForwardsEveryMethodToTheSameMethodOfItsTarget) {
  auto target = std::make_shared<RecordingStore>();
  StoreWrapper w(target);
  EXPECT_EQ(w.target(), target);
  const StoreCapabilities c = w.capabilities();
  EXPECT_TRUE(c.entities);
  EXPECT_TRUE(c.combined_commit_claim);
  EXPECT_EQ(c.false_positive_rate, 0.25);

  const ClaimRequest q{"q", "o", Duration{1}};
  const CommitRequest k{"c", "o"};
  const EntityWrite ew{"ek"};
  const BufferPut bp{"bk", 1, "bid"};
  std::vector<std::string> answers;
  auto note = [&](const Status& s) { answers.push_back(s.message()); };
  note(w.claim(q).status());
  note(w.commit(k));
  note(w.release({"r", "o"}).status());
  note(w.extend({"e", "o"}));
  note(w.inspect("i", TimePoint{}).status());
  note(w.claim_batch(std::span(&q, 1))[0].status());
  note(w.commit_batch(std::span(&k, 1))[0]);
  auto both = w.commit_then_claim(k, q);
  note(both.commit);
  note(both.claim.status());
  note(w.begin(TimePoint{}).status());
  note(w.begin_batch(TimePoint{}).status());
  note(w.read_entity("rk").status());
  note(w.write_entity(ew));
  note(w.buffer_put(bp));
  note(w.buffer_put_batch(std::span(&bp, 1))[0]);
  note(w.buffer_read("rb", 1).status());
  note(w.buffer_remove("rm", 1));
  note(w.buffer_summary(1).status());
  note(w.purge_expired(TimePoint{}, 1).status());

  const std::vector<std::string> want_calls = {
      "claim(q)",
      "commit(c)",
      "release(r)",
      "extend(e)",
      "inspect(i)",
      "claim_batch(q)",
      "commit_batch(c)",
      "commit_then_claim(c)",
      "commit_then_claim.claim(q)",
      "begin()",
      "begin_batch()",
      "read_entity(rk)",
      "write_entity(ek)",
      "buffer_put(bk)",
      "buffer_put_batch(bk)",
      "buffer_read(rb)",
      "buffer_remove(rm)",
      "buffer_summary()",
      "purge_expired()",
  };
  EXPECT_EQ(target->calls, want_calls) << "each call reaches the same method, once";
  const std::vector<std::string> want_answers = {
      "claim",
      "commit",
      "release",
      "extend",
      "inspect",
      "claim_batch",
      "commit_batch",
      "commit_then_claim",
      "commit_then_claim.claim",
      "begin",
      "begin_batch",
      "read_entity",
      "write_entity",
      "buffer_put",
      "buffer_put_batch",
      "buffer_read",
      "buffer_remove",
      "buffer_summary",
      "purge_expired",
  };
  EXPECT_EQ(answers, want_answers) << "the target's answers come back unchanged";
}

}  // namespace
}  // namespace idem
