// `idem consume` on a real Kafka broker with one of its two consumers on a host of the
// test's own (support/netns.hpp), cut from the broker three times for longer than the
// group session (1.5 s): the group gives the cut member's partitions to the other,
// which resumes from the committed offsets; the cut one rejoins by itself, and the
// shared kill test's checks hold (support/consume_kills.hpp). The broker has one more
// listener on the link, advertised there, which the cut consumer bootstraps from.
// Label "partitions"; skipped, with the reason, where no namespace can be made.
#include <gtest/gtest.h>

#include "support/consume_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/kafka_server.hpp"
#include "support/netns.hpp"

namespace idem::kafka_test {
namespace {

TEST(KafkaPartition, AConsumerCutPastItsSessionLosesNothingAndRejoins) {
  auto host = test_support::Host::create();
  if (!host.ok()) IDEM_NO_NETNS() << host.status().message();
  auto server = KafkaServer::start(1, (*host)->here());
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  ASSERT_FALSE((*server)->link_bootstraps().empty());
  KafkaBroker broker(**server, "", (*server)->link_bootstraps());
  consume_kills::run_partition_test(broker, consume_kills::Mode{"strict", true, "1"}, {}, **host, {.label = "kafka"});
}

}  // namespace
}  // namespace idem::kafka_test
