// `idem consume` on NATS JetStream with one of its two consumers on a host of the
// test's own (support/netns.hpp), cut from the server three times for longer than the
// ack wait: JetStream redelivers what the cut one held to the other, the cut one
// reconnects by itself, and the shared kill test's checks hold
// (support/consume_kills.hpp). The server listens on the link's address only
// (nats-server takes one), which this side reaches as a local address. Label
// "partitions"; skipped, with the reason, where no namespace can be made.
#include <gtest/gtest.h>

#include "nats/jetstream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/nats_server.hpp"
#include "support/netns.hpp"

namespace idem::nats_test {
namespace {

TEST(NatsPartition, AConsumerCutPastItsAckWaitLosesNothingAndReconnects) {
  auto host = test_support::Host::create();
  if (!host.ok()) IDEM_NO_NETNS() << host.status().message();
  auto server = NatsServer::start({.address = (*host)->here()});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  JetStreamBroker broker(**server);
  consume_kills::run_partition_test(broker, consume_kills::Mode{"strict", true, "1"}, {}, **host,
                                    {.label = "nats jetstream"});
}

}  // namespace
}  // namespace idem::nats_test
