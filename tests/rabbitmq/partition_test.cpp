// `idem consume` on RabbitMQ with one of its two consumers on a host of the test's own
// (support/netns.hpp), cut from the node three times: the node keeps the cut
// consumer's unacked deliveries until it notices the connection is gone (heartbeats),
// then hands them to the other consumer; the cut one reconnects by itself, and the
// shared kill test's checks hold (support/consume_kills.hpp). The node listens on the
// link's address only, which this side reaches as a local address. Label
// "partitions"; skipped, with the reason, where no namespace can be made.
#include <gtest/gtest.h>

#include "rabbitmq/queue_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/netns.hpp"
#include "support/rabbitmq_server.hpp"

namespace idem::rabbitmq_test {
namespace {

TEST(RabbitMqPartition, AConsumerCutFromTheNodeLosesNothingAndReconnects) {
  auto host = test_support::Host::create();
  if (!host.ok()) IDEM_NO_NETNS() << host.status().message();
  auto server = RabbitServer::start((*host)->here());
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  QueueBroker broker(**server);
  consume_kills::run_partition_test(broker, consume_kills::Mode{"strict", true, "1"}, {}, **host,
                                    {.label = "rabbitmq"});
}

}  // namespace
}  // namespace idem::rabbitmq_test
