// The Pulsar adapter over TLS (pulsar-wss://) against the binary's broker, which
// serves its web APIs on a TLS port too: publish and consume with the CA given, by IP
// address and by name, and with the system's trust store holding it; a CA that did
// not sign the broker's certificate and TLS against the plaintext port refused at once
// with the reason; plaintext against the TLS port unavailable; tls_insecure connects.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "idem/pulsar_source.hpp"
#include "support/pulsar_server.hpp"

namespace idem::pulsar {
namespace {

using pulsar_test::PulsarServer;
using SteadyClock = std::chrono::steady_clock;

PulsarServer& broker() { return PulsarServer::shared(); }

std::string fresh_topic() {
  static std::atomic<int> n{0};
  return "tls-" + std::to_string(n.fetch_add(1));
}

// "SCHEME://HOST:PORT/public/default/TOPIC?" + query.
std::string uri(const std::string& scheme, const std::string& host, std::uint16_t port, const std::string& topic,
                const std::string& query) {
  return scheme + "://" + host + ":" + std::to_string(port) + "/public/default/" + topic + "?" + query;
}

StatusOr<std::unique_ptr<Publisher>> publisher(const std::string& text) {
  auto o = parse_uri(text);
  if (!o.ok()) return o.status();
  o->connect_timeout = Duration(3000);
  o->request_timeout = Duration(5000);
  return open_publisher(*o);
}

// Publishes n messages and consumes them back through `text`'s subscription.
void expect_round_trip(const std::string& text, int n = 3) {
  auto p = publisher(text);
  ASSERT_TRUE(p.ok()) << text << ": " << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back({.id = "m" + std::to_string(i), .body = "m" + std::to_string(i)});
  ASSERT_TRUE((*p)->publish(msgs).ok());
  auto o = parse_uri(text + "&subscription=s");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto s = open(*o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::vector<Delivery> got;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(20);
  while (got.size() < static_cast<std::size_t>(n) && SteadyClock::now() < deadline)
    ASSERT_TRUE((*s)->fetch(n - got.size(), Duration(200), got).ok());
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n)) << "every message consumed over TLS";
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i].body, "m" + std::to_string(i));
}

void expect_refused(const std::string& text, StatusCode code, const std::string& cause) {
  const auto start = SteadyClock::now();
  auto p = publisher(text);
  ASSERT_FALSE(p.ok()) << text;
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(5)) << text;
  EXPECT_EQ(p.status().code(), code) << p.status().to_string();
  EXPECT_NE(p.status().message().find(cause), std::string::npos) << p.status().to_string();
}

TEST(PulsarTls, PublishAndConsumeOverVerifiedTls) {
  const std::string ca = "tls_ca=" + broker().tls().ca;
  ASSERT_NE(broker().tls_port(), 0);
  expect_round_trip(uri("pulsar-wss", "127.0.0.1", broker().tls_port(), fresh_topic(), ca));
  expect_round_trip(uri("pulsar-wss", "localhost", broker().tls_port(), fresh_topic(), ca));
  expect_round_trip(uri("pulsar-ws", "127.0.0.1", broker().tls_port(), fresh_topic(), ca));  // tls_ca asks for TLS
  ASSERT_EQ(::setenv("SSL_CERT_FILE", broker().tls().ca.c_str(), 1), 0);  // OpenSSL's default verify paths
  expect_round_trip(uri("pulsar-wss", "127.0.0.1", broker().tls_port(), fresh_topic(), "tls=1"));
  ::unsetenv("SSL_CERT_FILE");
}

TEST(PulsarTls, EveryMismatchIsRefused) {
  const std::uint16_t port = broker().tls_port();
  expect_refused(uri("pulsar-wss", "127.0.0.1", port, fresh_topic(), "tls_ca=" + broker().tls().other_ca),
                 StatusCode::kFailedPrecondition, "the server's certificate is not accepted");
  expect_refused(uri("pulsar-wss", "127.0.0.1", port, fresh_topic(), "tls=1"), StatusCode::kFailedPrecondition,
                 "the server's certificate is not accepted");
  expect_refused(uri("pulsar-wss", "127.0.0.1", broker().web_port(), fresh_topic(), "tls_ca=" + broker().tls().ca),
                 StatusCode::kFailedPrecondition, "the handshake failed");
  auto plain = publisher(uri("pulsar-ws", "127.0.0.1", port, fresh_topic(), "receiver_queue=1"));
  EXPECT_FALSE(plain.ok()) << "plaintext against the TLS port";
  expect_round_trip(
      uri("pulsar-wss", "127.0.0.1", port, fresh_topic(), "tls_ca=" + broker().tls().other_ca + "&tls_insecure=1"));
  auto off = parse_uri(uri("pulsar-wss", "127.0.0.1", port, fresh_topic(), "tls=0"));
  EXPECT_EQ(off.status().code(), StatusCode::kInvalidArgument) << "tls=0 with pulsar-wss://";
}

}  // namespace
}  // namespace idem::pulsar
