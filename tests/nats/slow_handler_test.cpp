// A handler three times slower than AckWait, which is the lease, behind `idem consume`
// with two consumers of one durable (support/slow_handler.hpp). The source's
// keep_alive() sends +WPI for each running delivery, so JetStream never hands it to
// the other consumer: each message is called once, and no copy meets the store's
// lease (in_progress). Label scenarios (end to end).
#include <gtest/gtest.h>

#include "nats/jetstream_broker.hpp"
#include "support/nats_server.hpp"
#include "support/slow_handler.hpp"

namespace idem::nats_test {
namespace {

TEST(NatsSlowHandler, AHandlerThreeTimesSlowerThanAckWaitRunsOnceAcrossTwoConsumers) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  JetStreamBroker broker(**server);
  const slow_handler::Outcome o = slow_handler::run(broker, "slow", std::chrono::milliseconds(1000));
  EXPECT_EQ(o.calls, (std::map<std::string, std::vector<int>>{{"s-1", {1}}, {"s-2", {1}}})) << o.logs;
  EXPECT_EQ(o.in_progress, 0u) << o.logs;
}

}  // namespace
}  // namespace idem::nats_test
