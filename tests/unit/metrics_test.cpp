// Metrics counters and histograms, the Prometheus text, and the ack-timeout watchdog.
#include "idem/backend/store_wrapper.hpp"
#include "unit/consumer_test_support.hpp"

namespace idem::test {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// latency_metrics = false: the same decisions and counters, empty latency histograms,
// and the commit still sees the time after the handler (a lease that ran out during
// the handler is lost, not silently kept).
TEST_F(ConsumerTest, WithoutLatencyMetricsDecisionsAndLeasesAreUnchanged) {
  ConsumerOptions o = options();
  o.latency_metrics = false;
  o.lease = seconds(30);
  auto c = make(o, [&](const Msg& m, HandlerContext&) {
    if (*m.id == "slow") {
      clock_->advance(seconds(31));
      auto other = store_->claim({*m.id, "other-owner", seconds(30), std::nullopt, clock_->now()});
      EXPECT_TRUE(other.ok() && other->status == ClaimStatus::kNew);
    }
    return HandlerResult::ok();
  });
  EXPECT_EQ(c.process(msg("a")).reason, Reason::kProcessed);
  EXPECT_EQ(c.process(msg("a")).reason, Reason::kDuplicate);
  EXPECT_EQ(c.process(msg("slow")).reason, Reason::kLeaseLost);
  const MetricsSnapshot s = c.metrics().snapshot();
  EXPECT_EQ(s.decisions_for(Reason::kProcessed), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kDuplicate), 1u);
  EXPECT_EQ(s.handler_latency.count, 0u);
  EXPECT_EQ(s.store_latency.count, 0u);
}

// The memory store wrapped so that it no longer says in_process: its calls are timed.
class TimedMemoryStore final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  StoreCapabilities capabilities() const override {
    StoreCapabilities c = StoreWrapper::capabilities();
    c.in_process = false;
    return c;
  }
};

TEST_F(ConsumerTest, CountersPerReasonAndAction) {
  ConsumerOptions o = options();
  o.max_retries = 1;
  o.store = std::make_shared<TimedMemoryStore>(store_);
  auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
    clock_->advance(milliseconds(1500));
    (void)ctx;
    return *m.id == "bad" ? HandlerResult::fail("x") : HandlerResult::ok();
  });
  Msg good = msg("good");
  good.received_at = clock_->now() - milliseconds(300);
  c.process(good);         // processed
  c.process(msg("good"));  // duplicate
  c.process(msg("bad"));   // handler_failed (retry)
  c.process(msg("bad"));   // retries_exhausted (dead_letter)
  c.process(Msg{});        // bad_message (dead_letter)

  const MetricsSnapshot s = c.metrics().snapshot();
  EXPECT_EQ(s.decisions_for(Reason::kProcessed), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kDuplicate), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kHandlerFailed), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kRetriesExhausted), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kBadMessage), 1u);
  EXPECT_EQ(s.decisions_for(Reason::kInProgress), 0u);
  EXPECT_EQ(s.actions_for(Action::kAck), 2u);
  EXPECT_EQ(s.actions_for(Action::kRetry), 1u);
  EXPECT_EQ(s.actions_for(Action::kDeadLetter), 2u);
  EXPECT_EQ(s.actions_for(Action::kHold), 0u);

  // Histograms: 3 handler calls of 1.5 s each, in the (1 s, 2 s] bucket.
  EXPECT_EQ(s.handler_latency.count, 3u);
  EXPECT_NEAR(s.handler_latency.sum_seconds, 4.5, 1e-6);
  const std::size_t two_seconds =
      std::find(kLatencyBucketsSeconds.begin(), kLatencyBucketsSeconds.end(), 2.0) - kLatencyBucketsSeconds.begin();
  EXPECT_EQ(s.handler_latency.buckets[two_seconds], 3u);
  EXPECT_GE(s.store_latency.count, 4u) << "every claim, commit and release is timed";
  EXPECT_EQ(s.queue_wait.count, 1u) << "only the message with received_at";
  EXPECT_NEAR(s.queue_wait.sum_seconds, 0.3, 1e-6);

  const std::string text = c.metrics().prometheus();
  for (const char* needle : {
           "# TYPE idem_decisions_total counter",
           "idem_decisions_total{reason=\"processed\"} 1",
           "idem_decisions_total{reason=\"retries_exhausted\"} 1",
           "idem_actions_total{action=\"dead_letter\"} 2",
           "idem_actions_total{action=\"hold\"} 0",
           "idem_ack_timeout_warnings_total 0",
           "# TYPE idem_handler_seconds histogram",
           "idem_handler_seconds_bucket{le=\"2\"} 3",
           "idem_handler_seconds_bucket{le=\"+Inf\"} 3",
           "idem_handler_seconds_count 3",
           "idem_store_seconds_count",
           "idem_queue_wait_seconds_count 1",
       }) {
    EXPECT_NE(text.find(needle), std::string::npos) << "missing: " << needle << "\n" << text;
  }
  EXPECT_NE(c.metrics().prometheus("app").find("app_decisions_total{reason=\"duplicate\"} 1"), std::string::npos);
}

TEST_F(ConsumerTest, MetricsCanBeShared) {
  auto shared = std::make_shared<Metrics>();
  ConsumerOptions o = options();
  o.metrics = shared;
  auto a = make(o, [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  auto b = make(o, [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  a.process(msg("m1"));
  b.process(msg("m1"));
  EXPECT_EQ(&a.metrics(), shared.get());
  EXPECT_EQ(shared->snapshot().decisions_for(Reason::kProcessed), 1u);
  EXPECT_EQ(shared->snapshot().decisions_for(Reason::kDuplicate), 1u);
}

TEST_F(ConsumerTest, AckTimeoutWatchdogNamesTheCause) {
  ConsumerOptions o = options();
  o.broker_ack_timeout = seconds(10);
  auto c = make(o, [&](const Msg& m, HandlerContext&) {
    if (*m.id == "slow-handler") clock_->advance(seconds(12));
    return HandlerResult::ok();
  });

  Msg queued = msg("queued");
  queued.received_at = clock_->now() - seconds(15);  // waited 15 s in the client queue
  c.process(queued);
  EXPECT_EQ(log_.count_lines("ack timeout"), 1) << log_.text();
  EXPECT_EQ(log_.count_lines("cause: queue wait"), 1) << log_.text();

  Msg slow = msg("slow-handler");
  slow.received_at = clock_->now();
  c.process(slow);
  EXPECT_EQ(log_.count_lines("ack timeout"), 2) << log_.text();
  EXPECT_EQ(log_.count_lines("cause: handler time"), 1) << log_.text();

  Msg quick = msg("quick");
  quick.received_at = clock_->now() - seconds(9);
  c.process(quick);
  Msg unknown = msg("no-receipt-time");
  c.process(unknown);
  EXPECT_EQ(log_.count_lines("ack timeout"), 2) << "under the timeout, or no receipt time: no warning";
  EXPECT_EQ(c.metrics().snapshot().ack_timeout_warnings, 2u);
}

TEST_F(ConsumerTest, AckTimeoutWatchdogIsOffByDefault) {
  auto c = make(options(), [&](const Msg&, HandlerContext&) {
    clock_->advance(hours(1));
    return HandlerResult::ok();
  });
  Msg m = msg("m1");
  m.received_at = clock_->now() - hours(1);
  c.process(m);
  EXPECT_EQ(c.metrics().snapshot().ack_timeout_warnings, 0u);
  EXPECT_EQ(log_.count_lines("ack timeout"), 0);
}

TEST_F(ConsumerTest, CallsToAnInProcessStoreAreNotTimed) {
  ASSERT_TRUE(store_->capabilities().in_process) << "memory: is in_process";
  auto c = make(options(), [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_EQ(c.process(msg("a")).reason, Reason::kProcessed);
  EXPECT_EQ(c.process(msg("a")).reason, Reason::kDuplicate);
  const MetricsSnapshot s = c.metrics().snapshot();
  EXPECT_EQ(s.store_latency.count, 0u);
  EXPECT_EQ(s.handler_latency.count, 1u) << "the handler is still timed";
}

}  // namespace
}  // namespace idem::test
