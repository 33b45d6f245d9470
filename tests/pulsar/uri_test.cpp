// The Pulsar adapter without a broker: its URI, message ids and their positions.
#include <gtest/gtest.h>

#include "idem/backend/store_uri.hpp"
#include "idem/pulsar_source.hpp"
#include "message_id.hpp"

namespace idem::pulsar {
namespace {

TEST(PulsarUri, ReadsEveryPart) {
  auto o = parse_uri(
      "pulsar-ws://broker:8081/acme/orders/created?subscription=billing&type=key_shared&dlq=dead&token=s3cret-tok"
      "&ack_timeout_ms=2000&nack_delay_ms=250&receiver_queue=10&connect_timeout_ms=700");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->host, "broker");
  EXPECT_EQ(o->port, 8081);
  EXPECT_EQ(o->tenant, "acme");
  EXPECT_EQ(o->name_space, "orders");
  EXPECT_EQ(o->topic, "created");
  EXPECT_EQ(o->subscription, "billing");
  EXPECT_EQ(o->type, SubscriptionType::kKeyShared);
  EXPECT_EQ(o->dead_letter_topic, "dead");
  EXPECT_EQ(o->token, "s3cret-tok");
  EXPECT_EQ(o->ack_timeout.count(), 2000);
  EXPECT_EQ(o->nack_delay.count(), 250);
  EXPECT_EQ(o->receiver_queue, 10u);
  EXPECT_EQ(o->connect_timeout.count(), 700);
}

TEST(PulsarUri, DefaultsToASharedSubscriptionWithoutAckTimeout) {
  auto o = parse_uri("pulsar-ws://127.0.0.1:8080/public/default/t?subscription=s");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->type, SubscriptionType::kShared);
  EXPECT_EQ(o->ack_timeout.count(), 0);
  EXPECT_EQ(o->nack_delay.count(), 1000);
  EXPECT_TRUE(o->dead_letter_topic.empty());  // open() makes it "<topic>-DLQ"
}

TEST(PulsarUri, RefusesWhatItCannotUseWithoutEchoingTheToken) {
  for (const char* uri : {
           "pulsar://127.0.0.1:6650/public/default/t?subscription=s",  // the binary protocol
           "pulsar-ws://127.0.0.1:8080/public/default?subscription=s&token=tok-SECRET-1",
           "pulsar-ws://127.0.0.1:8080/public/default/t/x?subscription=s&token=tok-SECRET-1",
           "pulsar-ws://127.0.0.1/public/default/t?token=tok-SECRET-1",
           "pulsar-ws://u:tok-SECRET-1@127.0.0.1:8080/public/default/t",
           "pulsar-ws://127.0.0.1:8080/public/default/t?type=round_robin&token=tok-SECRET-1",
           "pulsar-ws://127.0.0.1:8080/public/default/t?receiver_queue=0&token=tok-SECRET-1",
           "pulsar-ws://127.0.0.1:8080/public/default/t?nack_delay_ms=0&token=tok-SECRET-1",
           "pulsar-ws://127.0.0.1:8080/public/default/t?group=g&token=tok-SECRET-1",
       }) {
    auto o = parse_uri(uri);
    ASSERT_FALSE(o.ok()) << uri;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << uri;
    EXPECT_EQ(o.status().message().find("tok-SECRET-1"), std::string::npos) << o.status().message();
  }
  EXPECT_EQ(redact_uri("pulsar-ws://h:1/a/b/c?subscription=s&token=tok-SECRET-1").find("tok-SECRET-1"), std::string::npos);
}

TEST(PulsarOpen, RefusesBadNamesBeforeConnecting) {
  Options o;
  o.port = 1;  // nothing is reached: the names are refused first
  o.topic = "orders";
  auto s = open(o);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);  // no subscription
  o.subscription = "a/b";
  EXPECT_EQ(open(o).status().code(), StatusCode::kInvalidArgument);
  o.subscription = "s";
  o.ack_timeout = Duration(10);
  EXPECT_EQ(open(o).status().code(), StatusCode::kInvalidArgument);  // below Pulsar's 1 s
}

TEST(PulsarMessageId, Base64RoundTrips) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10 z", 5)}) {
    auto back = detail::base64_decode(detail::base64_encode(s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(detail::base64_encode("hello"), "aGVsbG8=");
  EXPECT_FALSE(detail::base64_decode("a$b=").has_value());
  EXPECT_FALSE(detail::base64_decode("abcde").has_value());
}

// MessageIdData: ledger 7 (field 1), entry 300 (field 2), partition -1 (field 3, as a
// ten-byte varint), batch index 2 (field 4).
std::string id_bytes(std::uint64_t ledger, std::uint64_t entry, int batch) {
  std::string b;
  auto varint = [&](std::uint64_t v) {
    do {
      b += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      v >>= 7;
    } while (v != 0);
  };
  b += '\x08', varint(ledger);
  b += '\x10', varint(entry);
  b += '\x18', varint(~0ULL);
  if (batch >= 0) b += '\x20', varint(static_cast<std::uint64_t>(batch));
  return b;
}

TEST(PulsarMessageId, DecodesAndOrdersPositions) {
  auto id = detail::parse_message_id(detail::base64_encode(id_bytes(7, 300, 2)));
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->ledger, 7u);
  EXPECT_EQ(id->entry, 300u);
  EXPECT_EQ(id->partition, -1);
  EXPECT_EQ(id->batch_index, 2);
  EXPECT_EQ(detail::to_string(*id), "7:300:2");
  const auto pos = [](std::uint64_t l, std::uint64_t e, int b) {
    return detail::position(*detail::parse_message_id(detail::base64_encode(id_bytes(l, e, b))));
  };
  EXPECT_LT(pos(7, 300, 2), pos(7, 300, 3));
  EXPECT_LT(pos(7, 300, 3), pos(7, 301, -1));
  EXPECT_LT(pos(7, 999'999, -1), pos(8, 0, -1));
  EXPECT_GT(pos(0, 1, -1), 0u);
  EXPECT_EQ(pos(1ULL << 24, 0, -1), 0u);  // beyond what the packing keeps in order
  EXPECT_FALSE(detail::parse_message_id(detail::base64_encode("\x08\x07")).has_value());  // no entry
  EXPECT_FALSE(detail::parse_message_id("not base64!").has_value());
}

}  // namespace
}  // namespace idem::pulsar
