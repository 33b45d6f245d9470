// The state machine at run time (docs/design.md §6): the product example, the retry cap, the
// three answers, bad input, table changes, and the machine with strict ordering — on
// the memory store and on SQLite.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/machine_gate.hpp"
#include "idem/open_store.hpp"
#include "idem/statemachine.hpp"
#include "product_machine.hpp"
#include "support/entity_messages.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem {
inline void PrintTo(const Decision& d, std::ostream* os) {
  *os << action_name(d.action) << "/" << reason_name(d.reason) << " delay=" << d.delay.count() << "ms";
  if (!d.detail.empty()) *os << " detail=\"" << d.detail << "\"";
}
}  // namespace idem

namespace idem::test {
namespace {

class MachineRuntimeTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string uri() const {
    if (GetParam() == "sqlite") return "sqlite:" + dir_.str() + "/idem.db";
    if (uri_.empty()) uri_ = test_support::store_uri(GetParam(), "");  // memory:, or a fresh postgres schema
    return uri_;
  }
  ConsumerOptions options(TransitionTable table = testing::product_table(), MachineGateOptions gate = {}) {
    ConsumerOptions o;
    if (!store_) store_ = open_store(uri()).value();
    o.store = store_;
    o.clock = clock_;
    o.machine = machine_gate(std::move(table), std::move(gate));
    return o;
  }
  Consumer<EntityMsg> make(ConsumerOptions o) {
    auto c = entity_consumer(std::move(o), journal_);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }
  static Decision expect_decision(const Decision& d, Action a, Reason r) {
    EXPECT_EQ(d.action, a) << ::testing::PrintToString(d);
    EXPECT_EQ(d.reason, r) << ::testing::PrintToString(d);
    return d;
  }
  std::string state_of(const std::string& key) { return store_->entities()->read_entity(key).value().state; }

  testing::TempDir dir_{"machine"};
  mutable std::string uri_;  // a postgres store keeps its schema across reopens
  std::shared_ptr<Store> store_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(from_unix_ms(1'000'000));
  Journal journal_;
};

TEST_P(MachineRuntimeTest, TheFieldsOwnExample) {
  auto c = make(options());
  expect_decision(c.process(evented("3", "p", "online")), Action::kAck, Reason::kProcessed);
  const Decision retry =
      expect_decision(c.process(evented("1", "p", "online")), Action::kRetry, Reason::kInvalidTransition);
  EXPECT_EQ(retry.delay, Duration(1000));  // the machine's backoff
  EXPECT_NE(retry.detail.find("online"), std::string::npos) << retry.detail;
  expect_decision(c.process(evented("2", "p", "offline")), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(evented("1", "p", "online")), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(evented("3", "p", "online")), Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(state_of("p"), "online");
  const auto runs = journal_.runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, "3");
  EXPECT_EQ(runs[0].from, "offline");
  EXPECT_EQ(runs[0].to, "online");
  EXPECT_EQ(runs[1].from, "online");
  EXPECT_EQ(runs[1].to, "offline");
  EXPECT_EQ(runs[2].id, "1");
  EXPECT_EQ(runs[2].to, "online");
}

// The same deliveries through process_batch: the first batch mixes a valid transition,
// a not-yet-valid one (the batch's commit lands before its retry is decided) and a
// transition from the state the batch's first commit makes.
TEST_P(MachineRuntimeTest, TheFieldsOwnExampleInBatches) {
  auto c = make(options());
  const auto first = c.process_batch(
      std::vector<EntityMsg>{evented("3", "p", "online"), evented("1", "p", "online"), evented("2", "p", "offline")});
  ASSERT_EQ(first.size(), 3u);
  expect_decision(first[0], Action::kAck, Reason::kProcessed);
  expect_decision(first[1], Action::kRetry, Reason::kInvalidTransition);
  expect_decision(first[2], Action::kAck, Reason::kProcessed);
  EXPECT_EQ(state_of("p"), "offline");
  const auto second = c.process_batch(std::vector<EntityMsg>{evented("1", "p", "online"), evented("3", "p", "online")});
  expect_decision(second[0], Action::kAck, Reason::kProcessed);
  expect_decision(second[1], Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(state_of("p"), "online");
  const auto runs = journal_.runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id + ":" + runs[0].from + ">" + runs[0].to, "3:offline>online");
  EXPECT_EQ(runs[1].id + ":" + runs[1].from + ">" + runs[1].to, "2:online>offline");
  EXPECT_EQ(runs[2].id + ":" + runs[2].from + ">" + runs[2].to, "1:offline>online");
}

// Two keys toggled in one batch: the transitions of each key chain in one commit.
TEST_P(MachineRuntimeTest, ABatchChainsTransitionsPerKey) {
  auto c = make(options());
  std::vector<EntityMsg> batch;
  for (int i = 0; i < 6; ++i) {
    const char* ev = i % 2 == 0 ? "online" : "offline";
    batch.push_back(evented("a" + std::to_string(i), "a", ev));
    batch.push_back(evented("b" + std::to_string(i), "b", ev));
  }
  for (const Decision& d : c.process_batch(batch)) expect_decision(d, Action::kAck, Reason::kProcessed);
  EXPECT_EQ(state_of("a"), "offline");
  EXPECT_EQ(store_->entities()->read_entity("b").value().revision, 6u);
  EXPECT_EQ(journal_.runs().size(), 12u);
}

TEST_P(MachineRuntimeTest, ANotYetValidEventGetsFiveRetriesThenDeadLetter) {
  auto c = make(options());
  expect_decision(c.process(evented("on", "p", "online")), Action::kAck, Reason::kProcessed);
  for (int i = 0; i < 5; ++i) {
    const Decision d =
        expect_decision(c.process(evented("again", "p", "online")), Action::kRetry, Reason::kInvalidTransition);
    EXPECT_EQ(d.delay, Duration(std::min<std::int64_t>(1000LL << i, 60'000)));
  }
  expect_decision(c.process(evented("again", "p", "online")), Action::kDeadLetter, Reason::kRetriesExhausted);
  expect_decision(c.process(evented("again", "p", "online")), Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(state_of("p"), "online");
}

TEST_P(MachineRuntimeTest, TheRetryCountSurvivesARestart) {
  {
    auto c = make(options());
    expect_decision(c.process(evented("on", "p", "online")), Action::kAck, Reason::kProcessed);
    for (int i = 0; i < 3; ++i)
      expect_decision(c.process(evented("again", "p", "online")), Action::kRetry, Reason::kInvalidTransition);
  }
  if (GetParam() == "memory") return;  // the memory store does not survive a restart
  store_.reset();
  auto c = make(options());
  for (int i = 0; i < 2; ++i)
    expect_decision(c.process(evented("again", "p", "online")), Action::kRetry, Reason::kInvalidTransition);
  expect_decision(c.process(evented("again", "p", "online")), Action::kDeadLetter, Reason::kRetriesExhausted);
}

TEST_P(MachineRuntimeTest, ANeverValidEventIsDeadLetteredAtOnce) {
  auto c = make(options());
  expect_decision(c.process(evented("del", "p", "delete")), Action::kAck, Reason::kProcessed);
  const Decision d =
      expect_decision(c.process(evented("on", "p", "online")), Action::kDeadLetter, Reason::kInvalidTransition);
  EXPECT_NE(d.detail.find("final"), std::string::npos) << d.detail;
  EXPECT_EQ(state_of("p"), "deleted");
}

TEST_P(MachineRuntimeTest, UnknownAndOverlongEventsAreDeadLetteredWithAReason) {
  auto c = make(options());
  const Decision unknown =
      expect_decision(c.process(evented("x", "p", "explode")), Action::kDeadLetter, Reason::kInvalidTransition);
  EXPECT_NE(unknown.detail.find("explode"), std::string::npos) << unknown.detail;
  const Decision longer =
      expect_decision(c.process(evented("y", "p", std::string(300, 'e'))), Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(longer.detail.find("exceeds"), std::string::npos) << longer.detail;
  EntityMsg no_event;
  no_event.id = "z";
  no_event.key = "p";
  expect_decision(c.process(no_event), Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_TRUE(journal_.runs().empty());
}

TransitionTable table_from(const std::string& yaml) {
  BuildResult r = load_machine_yaml(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.format(Severity::kError);
  return std::move(*r.table);
}

TEST_P(MachineRuntimeTest, AStoredStateTheNewTableDoesNotKnowIsNamedWithTheMigrationPath) {
  const std::string v1 =
      "name: product\ninitial: offline\ntransitions:\n"
      "  - {from: offline, on: online, to: online}\n  - {from: online, on: pause, to: paused}\n"
      "  - {from: paused, on: online, to: online}\n";
  {
    auto c = make(options(table_from(v1)));
    expect_decision(c.process(evented("a", "p", "online")), Action::kAck, Reason::kProcessed);
    expect_decision(c.process(evented("b", "p", "pause")), Action::kAck, Reason::kProcessed);
  }
  auto c = make(options(testing::product_table()));
  const Decision d = expect_decision(c.process(evented("c", "p", "online")), Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(d.detail.find("paused"), std::string::npos) << d.detail;
  EXPECT_NE(d.detail.find("renamed"), std::string::npos) << d.detail;
  // The documented migration: map the old state to a current one.
  const std::string v3 = testing::kProductYaml + "renamed: {paused: offline}\n";
  auto migrated = make(options(table_from(v3)));
  expect_decision(migrated.process(evented("d", "p", "online")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(state_of("p"), "online");
}

TEST_P(MachineRuntimeTest, EventsThatMustNotCreateAnEntityWait) {
  MachineGateOptions g;
  g.not_creating = {"delete"};
  auto c = make(options(testing::product_table(), g));
  const Decision d =
      expect_decision(c.process(evented("del", "p", "delete")), Action::kRetry, Reason::kInvalidTransition);
  EXPECT_NE(d.detail.find("does not exist yet"), std::string::npos) << d.detail;
  expect_decision(c.process(evented("on", "p", "online")), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(evented("del", "p", "delete")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(state_of("p"), "deleted");
}

TEST_P(MachineRuntimeTest, TwoConsumersCannotBothApplyATransition) {
  ConsumerOptions o = options();
  Journal other_journal;
  ConsumerOptions o2 = o;
  o2.owner = "other";
  auto other = entity_consumer(o2, other_journal).value();
  bool interleave = true;
  auto c = Consumer<EntityMsg>::create(o, entity_extractors(), [&](const EntityMsg& m, HandlerContext& ctx) {
    if (interleave) {
      interleave = false;
      EXPECT_EQ(other.process(evented("b", "p", "online")).reason, Reason::kProcessed);
    }
    return journal_.handle(m, ctx);
  });
  ASSERT_TRUE(c.ok());
  expect_decision(c->process(evented("a", "p", "online")), Action::kRetry, Reason::kConcurrentUpdate);
  EXPECT_EQ(state_of("p"), "online");
  // Redelivered: online → online is not valid (yet).
  expect_decision(c->process(evented("a", "p", "online")), Action::kRetry, Reason::kInvalidTransition);
}

TEST_P(MachineRuntimeTest, WithStrictOrderingTheMachineSeesVersionsInOrder) {
  ConsumerOptions o = options();
  o.ordering.mode = Ordering::kStrict;
  auto c = make(o);
  auto ev = [](std::string id, std::uint64_t v, std::string event) {
    EntityMsg m = evented(std::move(id), "p", std::move(event));
    m.version = v;
    return m;
  };
  const Action buffered = GetParam() == "memory" ? Action::kHold : Action::kAck;
  expect_decision(c.process(ev("v3", 3, "online")), buffered, Reason::kBuffered);
  expect_decision(c.process(ev("v2", 2, "offline")), buffered, Reason::kBuffered);
  expect_decision(c.process(ev("v1", 1, "online")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(state_of("p"), "online");
  EXPECT_EQ(store_->entities()->read_entity("p").value().version, 3u);
  const auto outs = journal_.outcomes();
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].from, "online");
  EXPECT_EQ(outs[0].to, "offline");
}

const std::vector<std::string> kStores = {"memory", "sqlite",
#ifdef IDEM_TESTS_WITH_POSTGRES
                                          "postgres"
#endif
};
INSTANTIATE_TEST_SUITE_P(Stores, MachineRuntimeTest, ::testing::ValuesIn(kStores),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace idem::test
