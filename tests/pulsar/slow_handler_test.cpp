// A handler three times slower than the consumer's ackTimeout behind `idem consume`
// with two consumers of one Shared subscription (support/slow_handler.hpp). Pulsar's
// WebSocket API has no way to say that work goes on, so the broker sends the message
// again once ackTimeout passes; the store catches each such copy at the running
// handler's lease (in_progress, retried later, then a duplicate). Each message is
// called once; the copies the store caught are counted and printed. Label scenarios.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/consume_broker.hpp"
#include "support/pulsar_server.hpp"
#include "support/slow_handler.hpp"

namespace idem::pulsar_test {
namespace {

TEST(PulsarSlowHandler, AHandlerThreeTimesSlowerThanTheAckTimeoutRunsOnceTheStoreCatchesTheCopies) {
  PulsarBroker broker(PulsarServer::shared(), "type=shared&ack_timeout_ms=1000");
  const slow_handler::Outcome o = slow_handler::run(broker, "slow", std::chrono::milliseconds(1000));
  EXPECT_EQ(o.calls, (std::map<std::string, std::vector<int>>{{"s-1", {1}}, {"s-2", {1}}})) << o.logs;
  EXPECT_GE(o.in_progress, 1u) << "the broker sent no copy before the ack timeout's end:\n" << o.logs;
  if (HasFailure()) return;  // the line below states what the checks found
  std::printf("pulsar slow handler: 2 messages of 3 s, ackTimeout 1 s; handler calls 1 each, %zu copies caught at "
              "the lease by the store\n",
              o.in_progress);
}

}  // namespace
}  // namespace idem::pulsar_test
