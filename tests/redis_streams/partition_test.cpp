// `idem consume` on Redis Streams with one of its two consumers on a host of the
// test's own (support/netns.hpp), cut from the broker three times for longer than the
// lease: the other consumer claims what the cut one held, the cut one reconnects by
// itself, and the shared kill test's checks hold (support/consume_kills.hpp): every
// effect once, in version order per key, nothing lost or left pending. Label
// "partitions"; skipped, with the reason, where no namespace can be made.
#include <gtest/gtest.h>

#include "redis_streams/stream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/netns.hpp"
#include "support/redis_server.hpp"

namespace idem::redis_streams_test {
namespace {

// A Redis server on 127.0.0.1 and the host's link, and the partition test over it.
void run_on_a_host(const consume_kills::PartitionOptions& options) {
  auto host = test_support::Host::create();
  if (!host.ok()) IDEM_NO_NETNS() << host.status().message();
  auto server = redis_test::RedisServer::start(
      {.extra = {"--bind", "127.0.0.1", (*host)->here(), "--protected-mode", "no"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  StreamBroker broker(**server);
  consume_kills::run_partition_test(broker, consume_kills::Mode{"strict", true, "1"}, {}, **host, options);
}

TEST(RedisStreamsPartition, AConsumerCutPastItsLeaseLosesNothingAndReconnects) {
  run_on_a_host({.label = "redis streams"});
}

// The same consumer on a link that drops 20% of its packets for the whole run: TCP
// retransmits stretch its calls past the lease now and then, the other consumer
// claims what it held, and the checks still hold.
TEST(RedisStreamsPartition, AConsumerOnALossyLinkLosesNothing) {
  run_on_a_host({.label = "redis streams", .loss_percent = 20, .cuts = 0});
}

}  // namespace
}  // namespace idem::redis_streams_test
