// A handler three times slower than RabbitMQ's delivery acknowledgement timeout
// (consumer_timeout), behind `idem consume` with two consumers of one queue
// (support/slow_handler.hpp). AMQP has no way to say that work goes on: at the
// timeout the node closes the first consumer's channel and hands its deliveries to
// the second. That copy meets the store's lease, which the sidecar extended to the
// handler timeout, so it is answered in_progress and the handler still runs once per
// message. Debian's RabbitMQ documents no timeout below a minute, because it checks
// once a minute; the test's node checks every quarter of a 2 s timeout
// (channel_tick_interval), so that the case takes seconds. Label scenarios.
#include <gtest/gtest.h>

#include <cstdio>

#include "rabbitmq/queue_broker.hpp"
#include "support/rabbitmq_server.hpp"
#include "support/slow_handler.hpp"

namespace idem::rabbitmq_test {
namespace {

TEST(RabbitmqSlowHandler, AHandlerThreeTimesSlowerThanTheConsumerTimeoutRunsOnceAndTheStoreCatchesTheCopies) {
  const std::chrono::milliseconds timeout(2000);
  auto server = RabbitServer::start("127.0.0.1", timeout);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  QueueBroker broker(**server);
  const slow_handler::Outcome o = slow_handler::run(broker, "slow", timeout);
  EXPECT_EQ(o.calls, (std::map<std::string, std::vector<int>>{{"s-1", {1}}, {"s-2", {1}}})) << o.logs;
  EXPECT_GT(o.in_progress, 0u) << "the node redelivered at its timeout, and the store answered the copies\n"
                               << o.logs;
  std::size_t calls = 0;
  for (const auto& [id, attempts] : o.calls) calls += attempts.size();
  std::printf("rabbitmq slow handler: 2 messages, handler calls %zu, copies caught by the store %zu\n", calls,
              o.in_progress);
}

}  // namespace
}  // namespace idem::rabbitmq_test
