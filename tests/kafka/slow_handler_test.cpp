// A handler three times slower than the group session (and the lease) behind `idem
// consume` with two consumers of one group (support/slow_handler.hpp). librdkafka
// heartbeats from its own thread and the runtime keeps polling while handlers run, so
// the member keeps its partitions; when the second member joins, the partitions that
// move are settled first (running handlers finish, unstarted deliveries are held).
// Each message is called once, and no copy meets the store's lease. Label scenarios.
#include <gtest/gtest.h>

#include "support/consume_broker.hpp"
#include "support/kafka_server.hpp"
#include "support/slow_handler.hpp"

namespace idem::kafka_test {
namespace {

TEST(KafkaSlowHandler, AHandlerThreeTimesSlowerThanTheSessionRunsOnceAcrossTwoConsumers) {
  KafkaBroker broker(KafkaServer::shared());  // consumers' session: 1.5 s
  const slow_handler::Outcome o = slow_handler::run(broker, "slow", std::chrono::milliseconds(1500));
  EXPECT_EQ(o.calls, (std::map<std::string, std::vector<int>>{{"s-1", {1}}, {"s-2", {1}}})) << o.logs;
  EXPECT_EQ(o.in_progress, 0u) << o.logs;
}

}  // namespace
}  // namespace idem::kafka_test
