// `idem consume --handler` against a real Redis and the handlers of examples/sidecar:
// each decides by the handler's answer and never calls it for a duplicate; a missing
// field is a bad message; an exec: child that dies is restarted; /metrics and
// /healthz answer while it runs.
#include <httplib.h>

#include "redis_streams/sidecar_support.hpp"
#include "redis_streams/stream_broker.hpp"

namespace idem::sidecar_test {
namespace {

using redis_streams_test::field_values;


TEST_P(Sidecar, DecidesByTheAnswerAndNeverCallsTheHandlerForADuplicate) {
  publish({R"({"id":"o-1"})", R"({"id":"o-2","fail":true})", R"({"id":"o-3","reject":true})",
           R"({"id":"o-4","busy":true})", R"({"id":"o-1"})"});
  const std::string out = consume();
  EXPECT_TRUE(has(out, R"("id":"o-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-1","action":"ack","reason":"duplicate","result":)")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-2","action":"retry","reason":"handler_failed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-2","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-3","action":"dead_letter","reason":"handler_rejected")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-4","action":"retry","reason":"retry_requested","delay_ms":1000)")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-4","action":"ack","reason":"processed")")) << out;
  const auto c = calls(handler_->log());
  EXPECT_EQ(c.at("o-1"), std::vector<int>{1}) << "the duplicate never reached the handler";
  EXPECT_EQ(c.at("o-2"), (std::vector<int>{1, 2}));
  EXPECT_EQ(c.at("o-3"), std::vector<int>{1}) << "a rejection is not retried";
  EXPECT_EQ(c.at("o-4"), (std::vector<int>{1, 2}));
  EXPECT_EQ(field_values(*server_, "orders:dlq", "body"), std::multiset<std::string>{R"({"id":"o-3","reject":true})"});
}

TEST_P(Sidecar, FieldsComeFromPointersAndAMissingOneIsABadMessage) {
  publish({R"({"order":{"id":"p-1"},"account":"a","version":1})", R"({"order":{},"account":"a","version":2})"});
  const std::string out = consume({"--id", "/order/id", "--key", "/account", "--version", "/version"});
  EXPECT_TRUE(has(out, R"("id":"p-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("action":"dead_letter","reason":"bad_message","detail":"id (/order/id) is missing)")) << out;
  EXPECT_EQ(calls(handler_->log()).size(), 1u);
}

// An exec: child that exits without answering fails its message, which is retried
// by a new child.
TEST_F(ExecSidecar, AChildThatDiesIsReplacedAndItsMessageRetried) {  publish({R"({"id":"c-1","crash":true})", R"({"id":"c-2"})"});
  const std::string out = consume({"--workers", "1"});
  EXPECT_TRUE(has(out, R"("id":"c-1","action":"retry","reason":"handler_failed","delay_ms":100,"detail":"the handler process exited)"))
      << out;
  EXPECT_TRUE(has(out, R"("id":"c-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"c-2","action":"ack","reason":"processed")")) << out;
  EXPECT_EQ(calls(handler_->log()).at("c-1"), (std::vector<int>{1, 2}));
}

// While it runs, /healthz answers and /metrics counts the decisions by reason.
TEST_F(PythonSidecar, ServesMetricsAndHealthWhileItRuns) {
  publish({R"({"id":"m-1"})", R"({"id":"m-1"})", R"({"id":"m-2","reject":true})"});
  const int port = test_support::free_port();
  const pid_t pid = spawn_idem({"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db"),
                                "--handler", handler_->spec(), "--workers", "1", "--metrics-listen",
                                "127.0.0.1:" + std::to_string(port)},
                               dir_.sub("consume.log"));
  httplib::Client client("127.0.0.1", port);
  std::string metrics;
  for (int i = 0; i < 200 && !has(metrics, R"(idem_decisions_total{reason="handler_rejected"} 1)"); ++i) {
    std::this_thread::sleep_for(50ms);
    if (auto r = client.Get("/metrics"); r && r->status == 200) metrics = r->body;
  }
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="processed"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="duplicate"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="handler_rejected"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, "idem_runtime_")) << "the runtime's metrics too";
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 30s), 0) << read_text(dir_.sub("consume.log"));
}

INSTANTIATE_TEST_SUITE_P(Handlers, Sidecar,
                         ::testing::Values(Kind{"python", true}, Kind{"node", true}, Kind{"exec", false}),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace idem::sidecar_test
