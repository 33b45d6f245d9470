// StoreWrapper forwards every virtual method of Store and of the facets its target has
// (entities, outbox, admin) to the same method of its target, with the same arguments,
// and returns the target's answer unchanged; it has no facet its target lacks.
#include "idem/backend/store_wrapper.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace idem {
namespace {

// Records which of its methods was called, with the id or key it was given, and
// answers each with a status naming the method.
class RecordingStore final : public Store, public EntityStore, public OutboxStore, public StoreAdmin {
 public:
  std::vector<std::string> calls;

  StoreCapabilities capabilities() const override {
    StoreCapabilities c;
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
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override {
    return record("outbox_pending", q.incoming_id.value_or(std::string_view()));
  }
  Status outbox_mark_sent(std::span<const OutboxEntry> e, TimePoint, Duration) override {
    return record("outbox_mark_sent", e[0].incoming_id);
  }
  StatusOr<RecordCounts> count_records(TimePoint) override { return record("count_records", ""); }
  StatusOr<bool> remove_record(std::string_view id, TimePoint) override { return record("remove_record", id); }
  StatusOr<bool> remove_entity(std::string_view key) override { return record("remove_entity", key); }
  EntityStore* entities() override { return this; }
  OutboxStore* outbox() override { return this; }
  StoreAdmin* admin() override { return this; }

 private:
  Status record(std::string method, std::string_view arg) {
    calls.push_back(method + "(" + std::string(arg) + ")");
    return unavailable(method);
  }
};

TEST(StoreWrapper, ForwardsEveryMethodToTheSameMethodOfItsTarget) {
  auto target = std::make_shared<RecordingStore>();
  StoreWrapper w(target);
  EXPECT_EQ(w.base(), target);
  const StoreCapabilities c = w.capabilities();
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
  note(w.entities()->read_entity("rk").status());
  note(w.entities()->write_entity(ew));
  note(w.entities()->buffer_put(bp));
  note(w.entities()->buffer_put_batch(std::span(&bp, 1))[0]);
  note(w.entities()->buffer_read("rb", 1).status());
  note(w.entities()->buffer_remove("rm", 1));
  note(w.entities()->buffer_summary(1).status());
  note(w.purge_expired(TimePoint{}, 1).status());
  OutboxQuery oq;
  oq.incoming_id = "oq";
  OutboxEntry oe;
  oe.incoming_id = "oe";
  note(w.outbox()->outbox_pending(oq).status());
  note(w.outbox()->outbox_mark_sent(std::span(&oe, 1), TimePoint{}, Duration{1}));
  note(w.admin()->count_records(TimePoint{}).status());
  note(w.admin()->remove_record("rr", TimePoint{}).status());
  note(w.admin()->remove_entity("re").status());

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
      "outbox_pending(oq)",
      "outbox_mark_sent(oe)",
      "count_records()",
      "remove_record(rr)",
      "remove_entity(re)",
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
      "outbox_pending",
      "outbox_mark_sent",
      "count_records",
      "remove_record",
      "remove_entity",
  };
  EXPECT_EQ(answers, want_answers) << "the target's answers come back unchanged";
}

// Only the facets the target has, and a wrapper's own overrides of facet calls apply.
TEST(StoreWrapper, HasExactlyTheFacetsOfItsTarget) {
  class Bare final : public Store {
   public:
    StoreCapabilities capabilities() const override { return {}; }
    StatusOr<ClaimResult> claim(const ClaimRequest&) override { return unavailable("x"); }
    Status commit(const CommitRequest&) override { return unavailable("x"); }
    StatusOr<std::uint32_t> release(const ReleaseRequest&) override { return unavailable("x"); }
    Status extend(const ExtendRequest&) override { return unavailable("x"); }
    StatusOr<std::optional<RecordInfo>> inspect(std::string_view, TimePoint) override { return unavailable("x"); }
    StatusOr<std::size_t> purge_expired(TimePoint, std::size_t) override { return unavailable("x"); }
  };
  StoreWrapper bare(std::make_shared<Bare>());
  EXPECT_EQ(bare.entities(), nullptr);
  EXPECT_EQ(bare.outbox(), nullptr);
  EXPECT_EQ(bare.admin(), nullptr);

  class OwnRead final : public StoreWrapper {
   public:
    using StoreWrapper::StoreWrapper;
    StatusOr<EntityRecord> read_entity(std::string_view) override { return not_found("own"); }
  };
  OwnRead own(std::make_shared<RecordingStore>());
  ASSERT_NE(own.entities(), nullptr);
  EXPECT_EQ(own.entities()->read_entity("k").status().message(), "own");
}

}  // namespace
}  // namespace idem
