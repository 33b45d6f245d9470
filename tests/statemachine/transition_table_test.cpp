// TransitionTable: the run-time lookups and the three answers of docs/design.md §6.
#include "idem/transition_table.hpp"

#include <gtest/gtest.h>

#include <string>

#include "idem/statemachine.hpp"
#include "statemachine/product_machine.hpp"

namespace idem {
namespace {

using testing::product_table;

StateId sid(const TransitionTable& t, std::string_view name) {
  auto id = t.state_id(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(kNoState);
}
EventId eid(const TransitionTable& t, std::string_view name) {
  auto id = t.event_id(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(kNoEvent);
}

TEST(TransitionTable, InternsStatesInitialFirstAndEventsInOrderOfMention) {
  const TransitionTable t = product_table();
  ASSERT_EQ(t.state_count(), 3u);
  ASSERT_EQ(t.event_count(), 3u);
  EXPECT_EQ(t.state_name(0), "offline");
  EXPECT_EQ(t.state_name(1), "online");
  EXPECT_EQ(t.state_name(2), "deleted");
  EXPECT_EQ(t.event_name(0), "online");
  EXPECT_EQ(t.event_name(1), "offline");
  EXPECT_EQ(t.event_name(2), "delete");
  EXPECT_EQ(t.initial(), 0);
  EXPECT_EQ(t.finals(), std::vector<StateId>{2});
  EXPECT_TRUE(t.is_final(2));
  EXPECT_FALSE(t.is_final(0));
  EXPECT_EQ(t.transitions().size(), 4u);
  EXPECT_EQ(t.max_retries(), 5u);
  EXPECT_EQ(t.backoff().initial, Duration(1000));
  EXPECT_EQ(t.backoff().max, Duration(60'000));
  EXPECT_EQ(t.max_event_name_bytes(), kDefaultMaxEventNameBytes);
}

TEST(TransitionTable, NextFollowsTheRows) {
  const TransitionTable t = product_table();
  EXPECT_EQ(t.next(sid(t, "offline"), eid(t, "online")), sid(t, "online"));
  EXPECT_EQ(t.next(sid(t, "online"), eid(t, "offline")), sid(t, "offline"));
  EXPECT_EQ(t.next(sid(t, "online"), eid(t, "delete")), sid(t, "deleted"));
  EXPECT_EQ(t.next(sid(t, "offline"), eid(t, "delete")), sid(t, "deleted"));
  EXPECT_EQ(t.next(sid(t, "online"), eid(t, "online")), std::nullopt);
  EXPECT_EQ(t.next(sid(t, "deleted"), eid(t, "online")), std::nullopt);
  EXPECT_EQ(t.next(7, 0), std::nullopt);
  EXPECT_EQ(t.next(0, 9), std::nullopt);
  EXPECT_EQ(t.next(kNoState, kNoEvent), std::nullopt);
}

TEST(TransitionTable, ProductVerdicts) {
  const TransitionTable t = product_table();
  const StateId off = sid(t, "offline"), on = sid(t, "online"), del = sid(t, "deleted");
  const EventId e_on = eid(t, "online"), e_off = eid(t, "offline"), e_del = eid(t, "delete");
  EXPECT_EQ(t.verdict(off, e_on), Verdict::kApply);
  EXPECT_EQ(t.verdict(off, e_del), Verdict::kApply);
  // offline → online accepts `offline`: not yet valid.
  EXPECT_EQ(t.verdict(off, e_off), Verdict::kNotYetValid);
  // online → offline accepts `online`: not yet valid (a second `online`
  // waits for an `offline` to bring the product back offline).
  EXPECT_EQ(t.verdict(on, e_on), Verdict::kNotYetValid);
  EXPECT_EQ(t.verdict(on, e_off), Verdict::kApply);
  EXPECT_EQ(t.verdict(on, e_del), Verdict::kApply);
  // deleted is final: every event is never valid.
  for (EventId e : {e_on, e_off, e_del}) EXPECT_EQ(t.verdict(del, e), Verdict::kNeverValid) << t.event_name(e);
  EXPECT_EQ(t.verdict(9, 0), Verdict::kNeverValid);
}

TEST(TransitionTable, NeverValidWhenOnlyAnUnreachableStateAcceptsTheEvent) {
  // a -go-> b -go2-> c; `go` is accepted only in a, which nothing leads back to.
  BuildResult r = Machine("chain").initial("a").rows({row("a", "go", "b"), row("b", "go2", "c")}).build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  const TransitionTable& t = *r.table;
  EXPECT_EQ(t.verdict(sid(t, "b"), eid(t, "go")), Verdict::kNeverValid);
  EXPECT_EQ(t.verdict(sid(t, "c"), eid(t, "go")), Verdict::kNeverValid);
  EXPECT_EQ(t.verdict(sid(t, "a"), eid(t, "go2")), Verdict::kNotYetValid);
  EXPECT_EQ(t.verdict(sid(t, "c"), eid(t, "go2")), Verdict::kNeverValid);
  // c is a dead end without being final: the reason says no reachable state accepts it.
  const TransitionCheck c = t.check("c", "go");
  EXPECT_EQ(c.verdict, Verdict::kNeverValid);
  EXPECT_NE(c.reason.find("no state reachable"), std::string::npos) << c.reason;
}

TEST(TransitionTable, CyclesMakeEveryEventOfTheCycleNotYetValid) {
  // a -x-> b -y-> c -z-> a, and c -stop-> end.
  BuildResult r = Machine("ring")
                      .initial("a")
                      .final_states({"end"})
                      .rows({row("a", "x", "b"), row("b", "y", "c"), row("c", "z", "a"), row("c", "stop", "end")})
                      .build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  const TransitionTable& t = *r.table;
  for (auto s : {"a", "b", "c"})
    for (auto e : {"x", "y", "z", "stop"}) {
      const Verdict v = t.verdict(sid(t, s), eid(t, e));
      EXPECT_TRUE(v == Verdict::kApply || v == Verdict::kNotYetValid) << s << " " << e;
    }
  EXPECT_EQ(t.verdict(sid(t, "a"), eid(t, "stop")), Verdict::kNotYetValid);
  for (auto e : {"x", "y", "z", "stop"}) EXPECT_EQ(t.verdict(sid(t, "end"), eid(t, e)), Verdict::kNeverValid);
}

TEST(TransitionTable, CheckByNamesGivesReasons) {
  const TransitionTable t = product_table();
  TransitionCheck c = t.check("offline", "online");
  EXPECT_EQ(c.verdict, Verdict::kApply);
  EXPECT_EQ(c.to, sid(t, "online"));
  EXPECT_EQ(c.from, sid(t, "offline"));
  EXPECT_EQ(c.event, eid(t, "online"));
  EXPECT_TRUE(c.reason.empty());

  c = t.check("online", "online");
  EXPECT_EQ(c.verdict, Verdict::kNotYetValid);
  EXPECT_EQ(c.to, kNoState);
  EXPECT_EQ(c.reason, "event \"online\" is not valid in state \"online\" yet: a state reachable from it accepts it");

  c = t.check("deleted", "online");
  EXPECT_EQ(c.verdict, Verdict::kNeverValid);
  EXPECT_EQ(c.reason, "event \"online\" is never valid from state \"deleted\" (a final state)");
}

TEST(TransitionTable, UnknownEventIsNeverValidAndNamed) {
  const TransitionTable t = product_table();
  const TransitionCheck c = t.check("online", "explode");
  EXPECT_EQ(c.verdict, Verdict::kNeverValid);
  EXPECT_EQ(c.event, kNoEvent);
  EXPECT_EQ(c.reason, "unknown event \"explode\": machine \"product\" has no such event");
  // Control bytes in an event name are escaped in the reason.
  EXPECT_NE(t.check("online", "a\"b\n").reason.find("\"a\\\"b\\x0a\""), std::string::npos);
}

TEST(TransitionTable, EventNameOverTheLimitIsRejected) {
  const TransitionTable t = product_table();
  const std::string at_limit(kDefaultMaxEventNameBytes, 'e');
  EXPECT_EQ(t.check("online", at_limit).verdict, Verdict::kNeverValid);  // unknown, but allowed
  const TransitionCheck c = t.check("online", at_limit + "e");
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_EQ(c.reason, "event name of 257 bytes exceeds the limit of 256 bytes");

  BuildResult r = Machine("m").initial("a").max_event_name_bytes(4).rows({row("a", "go", "b")}).build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  EXPECT_EQ(r.table->check("a", "go").verdict, Verdict::kApply);
  EXPECT_EQ(r.table->check("a", "going").verdict, Verdict::kRejected);
}

TEST(TransitionTable, UnknownStoredStateIsRejectedWithTheMigrationPath) {
  const TransitionTable t = product_table();
  const TransitionCheck c = t.check("archived", "online");
  EXPECT_EQ(c.verdict, Verdict::kRejected);
  EXPECT_NE(c.reason.find("stored state \"archived\" is not a state of machine \"product\""), std::string::npos);
  EXPECT_NE(c.reason.find("renamed"), std::string::npos) << c.reason;
  EXPECT_EQ(t.check(StateId{42}, "online").verdict, Verdict::kRejected);
}

TEST(TransitionTable, RenamedStatesResolveToTheirNewName) {
  BuildResult r = Machine("product")
                      .initial("offline")
                      .final_states({"deleted"})
                      .renamed("inactive", "offline")
                      .rows({row("offline", "online", "online"), row("online", "offline", "offline"),
                             row({"online", "offline"}, "delete", "deleted")})
                      .build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  const TransitionTable& t = *r.table;
  EXPECT_EQ(t.state_id("inactive"), t.state_id("offline"));
  const TransitionCheck c = t.check("inactive", "online");
  EXPECT_EQ(c.verdict, Verdict::kApply);
  EXPECT_EQ(t.state_name(c.to), "online");
  ASSERT_EQ(t.renamed().size(), 1u);
  EXPECT_EQ(t.renamed()[0], (std::pair<std::string, std::string>{"inactive", "offline"}));
  EXPECT_EQ(t.state_count(), 3u);  // an old name is not a state
}

TEST(TransitionTable, VerdictNames) {
  EXPECT_EQ(verdict_name(Verdict::kApply), "apply");
  EXPECT_EQ(verdict_name(Verdict::kNotYetValid), "not_yet_valid");
  EXPECT_EQ(verdict_name(Verdict::kNeverValid), "never_valid");
  EXPECT_EQ(verdict_name(Verdict::kRejected), "rejected");
}

}  // namespace
}  // namespace idem
