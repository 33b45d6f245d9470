// `idem consume` on a Pulsar standalone with one of its two consumers on a host of the
// test's own (support/netns.hpp), cut from the broker's WebSocket service three times:
// the other consumer of the subscription goes on, the cut one's deliveries come back
// to the subscription (its ack timeout, or its socket closing), the cut one reconnects
// by itself, and the shared kill test's checks hold (support/consume_kills.hpp). The
// standalone listens on the link's address only, which this side reaches as a local
// address. Label "partitions"; skipped, with the reason, where no namespace can be made.
#include <gtest/gtest.h>

#include <chrono>

#include "support/consume_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/netns.hpp"
#include "support/pulsar_server.hpp"

namespace idem::pulsar_test {
namespace {

TEST(PulsarPartition, AConsumerCutFromTheBrokerLosesNothingAndReconnects) {
  auto host = test_support::Host::create();
  if (!host.ok()) IDEM_NO_NETNS() << host.status().message();
  auto server = PulsarServer::start((*host)->here());
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  PulsarBroker broker(**server);
  // After the cuts the last consumers drain what came back (ack timeouts, strict order);
  // on a loaded 2-core machine that was still applying past 120 s, so it gets 300.
  consume_kills::run_partition_test(broker, consume_kills::Mode{"strict", true, "1"},
                                    {.final_timeout = std::chrono::seconds(300)}, **host, {.label = "pulsar"});
}

}  // namespace
}  // namespace idem::pulsar_test
