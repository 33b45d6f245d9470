// The Kafka adapter against a real Kafka broker (one per binary, started by
// scripts/broker.sh): URIs, consuming, the committed prefix, retry through the retry
// topic, dead letters with their headers, partition moves told to the listener, SASL
// PLAIN, a consumer stopped before its first assignment, TLS.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "idem/kafka_source.hpp"
#include "support/kafka_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
#include "support/ledger_example.hpp"
#endif

namespace idem::kafka {
namespace {

using kafka_test::KafkaServer;
using namespace std::chrono_literals;

KafkaServer& broker() { return KafkaServer::shared(); }

// A topic (or group) name no other test of this binary uses: they share one broker.
std::string fresh(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(n.fetch_add(1));
}

// The session (4.5 s by default) sets how often a member heartbeats (a quarter of it),
// and so how soon it learns of a rebalance.
Options options(const std::string& topic, const std::string& group, const std::string& session_ms = "4500") {
  auto o = parse_uri(broker().uri(topic, group, "session_timeout_ms=" + session_ms));
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return *o;
}

void publish(const std::string& topic, int n, const std::string& prefix = "m") {
  auto p = open_publisher(options(topic, ""));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back({.id = prefix + std::to_string(i), .body = prefix + std::to_string(i)});
  ASSERT_TRUE((*p)->publish(msgs).ok());
}

// Fetches until `n` deliveries came or `within` passed.
std::vector<Delivery> fetch_n(MessageSource& s, std::size_t n, std::chrono::milliseconds within = 20s) {
  std::vector<Delivery> out;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    EXPECT_TRUE(s.fetch(n - out.size(), Duration(100), out).ok());
  }
  return out;
}

std::string header(const Delivery& d, const std::string& name) {
  for (const auto& [k, v] : d.headers)
    if (k == name) return v;
  return "<none>";
}

TEST(KafkaUri, ParsesBrokersTopicAndParameters) {
  auto o = parse_uri("kafka://a:9092,b:9093/orders?group=g&partitions=4&session_timeout_ms=3000&dlq=dead");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->brokers, (std::vector<std::string>{"a:9092", "b:9093"}));
  EXPECT_EQ(o->topic, "orders");
  EXPECT_EQ(o->group, "g");
  EXPECT_EQ(o->partitions, 4);
  EXPECT_EQ(o->session_timeout, Duration(3000));
  EXPECT_EQ(o->dead_letter_topic, "dead");
  EXPECT_TRUE(o->retry_topic.empty());
  EXPECT_EQ(o->replication_factor, -1);
  EXPECT_TRUE(o->properties.empty());
  for (const char* bad : {"kafka://a:9092", "kafka://a:9092/", "kafka://a/t?group=g", "kafka://a:0/t", "kafka://a:1,/t",
                          "kafka://u:secret@a:1/t", "kafka://a:1/t?grup=g", "kafka://a:1/t?partitions=0",
                          "redis-stream://a:1/t", "kafka://a:1/t/x", "kafka://a:1/t?replication_factor=0",
                          "kafka://a:1/t?rdkafka.=1"}) {
    auto b = parse_uri(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(b.status().message().find("secret"), std::string::npos);
  }
}

TEST(KafkaUri, SecurityAndLibrdkafkaPropertiesAreHandedOnAndTheirSecretsNeverPrinted) {
  const std::string uri =
      "kafka://a:9092/t?group=g&replication_factor=3&security_protocol=SASL_SSL&sasl_mechanism=SCRAM-SHA-256"
      "&sasl_username=svc&sasl_password=pw%26secret1&rdkafka.ssl.key.password=keypass2"
      "&rdkafka.sasl.oauthbearer.client.secret=oauth3&rdkafka.fetch.min.bytes=1";
  auto o = parse_uri(uri);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->replication_factor, 3);
  const std::vector<std::pair<std::string, std::string>> want{{"security.protocol", "SASL_SSL"},
                                                              {"sasl.mechanisms", "SCRAM-SHA-256"},
                                                              {"sasl.username", "svc"},
                                                              {"sasl.password", "pw&secret1"},
                                                              {"enable.ssl.certificate.verification", "true"},
                                                              {"ssl.endpoint.identification.algorithm", "https"},
                                                              {"ssl.key.password", "keypass2"},
                                                              {"sasl.oauthbearer.client.secret", "oauth3"},
                                                              {"fetch.min.bytes", "1"}};
  EXPECT_EQ(o->properties, want);
  const std::string shown = redact_uri(uri);
  for (const char* secret : {"secret1", "keypass2", "oauth3"}) EXPECT_EQ(shown.find(secret), std::string::npos) << shown;
  for (const char* secret : {"pw&secret1", "pw%26secret1", "keypass2", "oauth3"}) {
    const std::string said = scrub_secrets(std::string("refused: ") + secret + " for " + uri, uri);
    EXPECT_EQ(said.find(secret), std::string::npos) << said;
  }
  EXPECT_NE(shown.find("sasl_username=svc"), std::string::npos) << shown;
  EXPECT_NE(shown.find("fetch.min.bytes=1"), std::string::npos) << shown;
}

TEST(KafkaSource, APropertyLibrdkafkaRefusesFailsOpenWithItsMessage) {
  auto o = parse_uri(broker().uri(fresh("props"), "g", "rdkafka.no.such.property=1"));
  ASSERT_TRUE(o.ok());
  auto s = open(*o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("no.such.property"), std::string::npos) << s.status().to_string();
  // A refused secret is named, never shown.
  o = parse_uri(broker().uri(fresh("props"), "g", "security_protocol=nonsense&sasl_mechanism=PLAIN&sasl_username=u&sasl_password=hunter22"));
  ASSERT_TRUE(o.ok());
  s = open(*o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("security.protocol"), std::string::npos) << s.status().to_string();
  EXPECT_EQ(s.status().message().find("hunter22"), std::string::npos) << s.status().to_string();
}

// SASL/PLAIN on the broker's SASL_PLAINTEXT listener: the right password consumes, a
// wrong one fails open() within the connect timeout without showing it.
TEST(KafkaSource, SaslPlainAuthenticatesAndAWrongPasswordIsRefused) {
  const std::string topic = fresh("sasl");
  publish(topic, 3);
  auto sasl_uri = [&](const std::string& password) {
    return "kafka://" + broker().sasl_bootstraps() + "/" + topic +
           "?group=g&connect_timeout_ms=3000&security_protocol=SASL_PLAINTEXT&sasl_mechanism=PLAIN&sasl_username=" +
           broker().sasl_user() + "&sasl_password=" + password;
  };
  auto o = parse_uri(sasl_uri(broker().sasl_password()));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto s = open(*o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(fetch_n(**s, 3).size(), 3u);
  (*s)->close();
  o = parse_uri(sasl_uri("wrong-pass-77"));
  ASSERT_TRUE(o.ok());
  auto refused = open(*o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().find("wrong-pass-77"), std::string::npos) << refused.status().to_string();
}

// librdkafka 2.0.2 aborted when a cooperative-sticky consumer was destroyed between
// joining its group and its first assignment. Each round opens a member of a group
// that already has one (so a join is under way) and closes it after a random wait.
TEST(KafkaSource, ConsumersStoppedBeforeTheirFirstAssignmentCloseCleanly) {
  const std::string topic = fresh("early");
  publish(topic, 1);
  auto first = open(options(topic, "early", "1000"));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(fetch_n(**first, 1).size(), 1u);
  std::atomic<bool> stop{false};
  std::thread polls([&] {  // the first member answers each rebalance
    std::vector<Delivery> keep;
    while (!stop) (void)(*first)->fetch(1, Duration(20), keep);
  });
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    auto s = open(options(topic, "early", "1000"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    std::vector<Delivery> none;
    EXPECT_TRUE((*s)->fetch(1, Duration(static_cast<std::int64_t>(rng() % 40)), none).ok());
    (*s)->close();
  }
  stop = true;
  polls.join();
}

TEST(KafkaSource, ConsumesFromTheStartAndCommitsOnlyTheDecidedPrefix) {
  const std::string t = fresh("t");
  publish(t, 10);  // before the group exists: consumed all the same
  {
    auto s = open(options(t, "g"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    std::vector<Delivery> got = fetch_n(**s, 10);
    ASSERT_EQ(got.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(got[i].body, "m" + std::to_string(i));
      EXPECT_EQ(got[i].partition, t + "/0");
      EXPECT_EQ(got[i].broker_id, t + "/0@" + std::to_string(i));
      EXPECT_EQ(got[i].delivery_count, 0u);
      EXPECT_EQ(header(got[i], "idem-id"), "m" + std::to_string(i));
    }
    for (int i = 9; i >= 0; --i) {  // decided out of order; 3 held
      if (i != 3) {
        ASSERT_TRUE((*s)->ack(got[i]).ok());
      }
    }
    (*s)->hold(got[3]);
    EXPECT_FALSE(*(*s)->drained());
    (*s)->close();
  }
  EXPECT_EQ(broker().lag(t, "g"), 7);  // committed 3: everything from the held one on comes again
  auto s = open(options(t, "g"));
  ASSERT_TRUE(s.ok());
  std::vector<Delivery> again = fetch_n(**s, 7);
  ASSERT_EQ(again.size(), 7u);
  EXPECT_EQ(again.front().body, "m3");
  for (const Delivery& d : again) ASSERT_TRUE((*s)->ack(d).ok());
  auto drained = (*s)->drained();
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(broker().lag(t, "g"), 0);
}

TEST(KafkaSource, RetryComesBackThroughTheRetryTopicOnceDue) {
  const std::string r = fresh("r");
  publish(r, 1);
  auto s = open(options(r, "g"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::vector<Delivery> got = fetch_n(**s, 1);
  ASSERT_EQ(got.size(), 1u);
  const auto retried_at = std::chrono::steady_clock::now();
  ASSERT_TRUE((*s)->retry(got[0], Duration(800)).ok());
  std::vector<Delivery> again = fetch_n(**s, 1);
  const auto waited = std::chrono::steady_clock::now() - retried_at;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(waited, 750ms);  // held in the source until due
  EXPECT_EQ(again[0].body, "m0");
  EXPECT_EQ(again[0].partition, r + ".retry/0");
  EXPECT_EQ(header(again[0], "idem-id"), "m0");
  EXPECT_EQ(header(again[0], "idem-origin"), r + "/0@0");
  EXPECT_NE(header(again[0], "idem-due-ms"), "<none>");
  EXPECT_FALSE(*(*s)->drained());
  ASSERT_TRUE((*s)->ack(again[0]).ok());
  auto drained = (*s)->drained();
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(broker().lag(r, "g"), 0);
  EXPECT_EQ(broker().lag(r + ".retry", "g"), 0);
}

TEST(KafkaSource, DeadLettersCarryTheReasonAndAreCommitted) {
  const std::string d = fresh("d");
  publish(d, 2);
  auto s = open(options(d, "g"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::vector<Delivery> got = fetch_n(**s, 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE((*s)->dead_letter(got[1], "malformed", "not JSON").ok());
  ASSERT_TRUE((*s)->ack(got[0]).ok());
  ASSERT_TRUE(*(*s)->drained());
  EXPECT_EQ(broker().lag(d, "g"), 0);
  EXPECT_EQ(broker().records(d + ".dlq"), (std::multimap<std::string, std::string>{{d + "/0@1", "m1"}}));
  auto dlq = open(options(d + ".dlq", "reader"));
  ASSERT_TRUE(dlq.ok());
  std::vector<Delivery> dead = fetch_n(**dlq, 1);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(header(dead[0], "idem-reason"), "malformed");
  EXPECT_EQ(header(dead[0], "idem-detail"), "not JSON");
  EXPECT_EQ(header(dead[0], "idem-origin"), d + "/0@1");
  EXPECT_EQ(header(dead[0], "idem-id"), "m1");
}

// Plays the runtime: holds deliveries; on_revoked settles those of the partitions.
class Listener : public AssignmentListener {
 public:
  explicit Listener(MessageSource*& s) : source_(s) {}
  void on_assigned(std::span<const std::string> p) override {
    assigned.insert(p.begin(), p.end());
    ++assigns;
  }
  void on_revoked(std::span<const std::string> p) override {
    revoked.insert(p.begin(), p.end());
    for (auto it = held.begin(); it != held.end();) {
      if (std::find(p.begin(), p.end(), it->partition) == p.end()) {
        ++it;
        continue;
      }
      EXPECT_TRUE(source_->ack(*it).ok());
      ++settled_on_revoke;
      it = held.erase(it);
    }
  }
  std::vector<Delivery> held;
  std::set<std::string> assigned, revoked;
  int settled_on_revoke = 0;
  int assigns = 0;

 private:
  MessageSource*& source_;
};

TEST(KafkaSource, ARebalanceSettlesAndCommitsTheRevokedPartitionsFirst) {
  const std::string p = fresh("p");
  ASSERT_TRUE(broker().create_topic(p, 2).ok());
  ASSERT_TRUE(broker().create_topic(p + ".retry", 1).ok());
  publish(p, 40);
  auto a = open(options(p, "g"));
  ASSERT_TRUE(a.ok());
  MessageSource* src = a->get();
  Listener la(src);
  (*a)->set_assignment_listener(&la);
  la.held = fetch_n(**a, 40);
  ASSERT_EQ(la.held.size(), 40u);
  EXPECT_EQ(la.assigned, (std::set<std::string>{p + "/0", p + "/1", p + ".retry/0"}));
  // A second member joins; the first learns of it on its next fetches.
  auto b = open(options(p, "g"));
  ASSERT_TRUE(b.ok());
  std::vector<Delivery> scratch;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (la.revoked.empty() && std::chrono::steady_clock::now() < deadline) {
    (void)(*b)->fetch(1, Duration(50), scratch);  // b joins while a polls
    std::vector<Delivery> more;
    (void)(*a)->fetch(1, Duration(50), more);
    la.held.insert(la.held.end(), more.begin(), more.end());
  }
  ASSERT_FALSE(la.revoked.empty()) << "no rebalance within 20 s";
  // Every held delivery of a revoked partition was settled before it went.
  for (const Delivery& d : la.held) EXPECT_EQ(la.revoked.count(d.partition), 0u) << d.broker_id;
  // The settled ones were committed when the partitions were given up: nobody reads
  // them again (b acked nothing).
  EXPECT_EQ(broker().lag(p, "g"), 40 - la.settled_on_revoke);
  (*a)->set_assignment_listener(nullptr);
}

// Polls both members until `m` says it is drained; false if it did not within 20 s.
bool drained_soon(MessageSource& m, MessageSource& other) {
  std::vector<Delivery> none;
  for (const auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    StatusOr<bool> d = m.drained();
    if (d.ok() && *d) return true;
    (void)m.fetch(1, Duration(50), none);
    (void)other.fetch(1, Duration(50), none);
  }
  EXPECT_TRUE(none.empty()) << "a member fetched a settled delivery";
  return false;
}

// Keeps what a member holds: its partitions and its undecided deliveries, which a
// revoke gives back to the broker unsettled.
class Holder : public AssignmentListener {
 public:
  void on_assigned(std::span<const std::string> p) override {
    owned.insert(p.begin(), p.end());
    ++assigns;
  }
  void on_revoked(std::span<const std::string> p) override {
    for (const std::string& n : p) owned.erase(n);
    std::erase_if(held, [&](const Delivery& d) { return std::find(p.begin(), p.end(), d.partition) != p.end(); });
  }
  std::set<std::string> owned;
  std::vector<Delivery> held;
  int assigns = 0;
};

// A member is drained only when the whole group is: one that owns nothing may still be
// given a partition another member works on, and must not leave (idle exit) before.
TEST(KafkaSource, AMemberIsNotDrainedWhileAnotherHoldsUndecidedMessages) {
  const std::string p = fresh("d");
  ASSERT_TRUE(broker().create_topic(p, 1).ok());
  ASSERT_TRUE(broker().create_topic(p + ".retry", 1).ok());
  publish(p, 10);
  auto a = open(options(p, "g"));
  auto b = open(options(p, "g"));
  ASSERT_TRUE(a.ok() && b.ok());
  Holder ha, hb;
  (*a)->set_assignment_listener(&ha);
  (*b)->set_assignment_listener(&hb);
  // Both poll until the one partition's 10 messages are held and 2 s more have passed.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto settled = std::chrono::steady_clock::time_point::max();
  while (std::chrono::steady_clock::now() < std::min(deadline, settled)) {
    EXPECT_TRUE((*a)->fetch(10, Duration(50), ha.held).ok());
    EXPECT_TRUE((*b)->fetch(10, Duration(50), hb.held).ok());
    if (ha.held.size() + hb.held.size() == 10 && settled == std::chrono::steady_clock::time_point::max())
      settled = std::chrono::steady_clock::now() + 2s;
  }
  ASSERT_EQ(ha.held.size() + hb.held.size(), 10u) << "the messages were not held within 30 s";
  const bool a_busy = !ha.held.empty();
  MessageSource& busy = a_busy ? **a : **b;
  MessageSource& idle = a_busy ? **b : **a;
  const Holder& idle_h = a_busy ? hb : ha;
  ASSERT_GT(idle_h.assigns, 0) << "the idle member never had its assignment";
  ASSERT_EQ(idle_h.owned.count(p + "/0"), 0u);
  StatusOr<bool> d = idle.drained();
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FALSE(*d) << "a member owning " << idle_h.owned.size() << " partitions said drained while the other holds 10";
  // The busy member settles them; then the group is done, as each member sees it.
  for (const Delivery& m : (a_busy ? ha : hb).held) EXPECT_TRUE(busy.ack(m).ok());
  EXPECT_TRUE(drained_soon(busy, idle));
  EXPECT_TRUE(drained_soon(idle, busy));
  (*a)->set_assignment_listener(nullptr);
  (*b)->set_assignment_listener(nullptr);
}

#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
// examples/ledger on this broker: every payment applied once, in order, one event each.
TEST(KafkaSource, TheLedgerExampleAppliesEachPaymentOnceInOrder) {
  idem::testing::TempDir dir("kafka-ledger");
  const std::string payments = fresh("payments"), events = fresh("credited");
  ledger_example::run({.payments_to = broker().uri(payments, ""),
                       .payments_from = broker().uri(payments, "ledger"),
                       .events_to = broker().uri(events, ""),
                       .events_from = broker().uri(events, "check")},
                      dir.str());
}
#endif

// --- TLS, on the shared broker's TLS listeners (support/kafka_server.hpp) ---

// "kafka://BOOTSTRAPS/TOPIC?connect_timeout_ms=3000&" + params.
std::string tls_uri(const std::string& bootstraps, const std::string& topic, const std::string& params) {
  return "kafka://" + bootstraps + "/" + topic + "?connect_timeout_ms=3000&" + params;
}

// The SASL user's password in a file, for sasl_password_file=.
const std::string& password_file() {
  static testing::TempDir dir("kafka-secret");
  static const std::string path = [] {
    const std::string p = dir.sub("password");
    std::ofstream(p) << broker().sasl_password() << "\n";
    return p;
  }();
  return path;
}

StatusOr<std::unique_ptr<MessageSource>> open_uri(const std::string& uri) {
  auto o = parse_uri(uri);
  if (!o.ok()) return o.status();
  return open(*o);
}

// A refusal comes at once, as one failed precondition, without the secret.
void expect_refused(const std::string& uri, const std::string& says) {
  const auto start = std::chrono::steady_clock::now();
  auto s = open_uri(uri);
  ASSERT_FALSE(s.ok()) << uri;
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().to_string();
  EXPECT_NE(s.status().message().find(says), std::string::npos) << s.status().to_string();
  EXPECT_EQ(s.status().message().find(broker().sasl_password()), std::string::npos) << s.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms) << "not refused before the connect timeout: " << uri;
}

// SASL PLAIN over TLS (SASL_SSL, as managed Kafka services take it), the password from
// a file: a publisher and a source both work; a wrong password is refused at once.
// (SCRAM is mapped the same way, sasl_mechanism=SCRAM-SHA-512, but Debian 12's
// librdkafka 2.0.2 fails it against Kafka 4 brokers; docs/security.md.)
TEST(KafkaTls, SaslOverTlsPublishesAndConsumesAndAWrongPasswordIsRefused) {
  const std::string topic = fresh("sasl-ssl");
  auto uri = [&](const std::string& group, const std::string& password) {
    return tls_uri(broker().sasl_ssl_bootstraps(), topic,
                   group + "sasl_mechanism=PLAIN&sasl_username=" + broker().sasl_user() + "&" + password +
                       "&tls_ca=" + broker().tls_files().ca);
  };
  auto o = parse_uri(uri("", "sasl_password_file=" + password_file()));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto p = open_publisher(*o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const std::vector<OutgoingMessage> two{{.id = "a", .body = "a"}, {.id = "b", .body = "b"}};
  ASSERT_TRUE((*p)->publish(two).ok());
  auto s = open_uri(uri("group=g&", "sasl_password_file=" + password_file()));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::multiset<std::string> bodies;
  for (const Delivery& d : fetch_n(**s, 2)) bodies.insert(d.body);
  EXPECT_EQ(bodies, (std::multiset<std::string>{"a", "b"}));
  (*s)->close();
  expect_refused(uri("group=g&", "sasl_password=wrong-55"), "Authentication failed");
}

// The SSL listener requires a client certificate: with one (its key plain or under a
// password from a file) the source consumes; without one it is refused at once.
TEST(KafkaTls, TheSslListenerTakesAClientCertificateAndRefusesNone) {
  const auto& t = broker().tls_files();
  const std::string topic = fresh("mtls");
  publish(topic, 2);
  testing::TempDir dir("kafka-key");
  const std::string key_password = dir.sub("key-password");
  std::ofstream(key_password) << test_support::kClientKeyPassword;
  for (const std::string& key : {"tls_key=" + t.client_key,
                                "tls_key=" + t.client_key_encrypted + "&tls_key_password_file=" + key_password}) {
    auto s = open_uri(tls_uri(broker().ssl_bootstraps(), topic,
                              "group=" + fresh("g") + "&tls_ca=" + t.ca + "&tls_cert=" + t.client_cert + "&" + key));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(fetch_n(**s, 2).size(), 2u) << key;
    (*s)->close();
  }
  expect_refused(tls_uri(broker().ssl_bootstraps(), topic, "group=g&tls_ca=" + t.ca), "refused the connection");
}

// The broker's certificate is checked against the CA (a wrong one, the system's trust
// store) and its name against the address (127.0.0.2 is not in it); tls_insecure=1
// turns both off. Plaintext and TLS on each other's ports fail without a hang.
TEST(KafkaTls, TheBrokersCertificateAndAddressAreVerifiedUnlessInsecure) {
  const auto& t = broker().tls_files();
  const std::string topic = fresh("verify");
  publish(topic, 1);
  expect_refused(tls_uri(broker().alt_bootstraps(), topic, "group=g&tls_ca=" + t.other_ca),
                 "certificate verify failed");
  expect_refused(tls_uri(broker().alt_bootstraps(), topic, "group=g&tls=1"), "certificate verify failed");
  expect_refused(tls_uri(broker().alt_bootstraps(), topic, "group=g&tls_ca=" + t.ca), "127.0.0.2");
  expect_refused(tls_uri(broker().bootstraps(), topic, "group=g&tls_ca=" + t.ca), "SSL");
  auto s = open_uri(tls_uri(broker().alt_bootstraps(), topic, "group=g&tls_insecure=1"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(fetch_n(**s, 1).size(), 1u);
  (*s)->close();
  auto plain = open_uri("kafka://" + broker().alt_bootstraps() + "/" + topic + "?group=g&connect_timeout_ms=1000");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kUnavailable) << plain.status().to_string();
}

TEST(KafkaUri, TlsParametersBecomeVerifyingSslPropertiesAndTheProtocolFollows) {
  using P = std::vector<std::pair<std::string, std::string>>;
  auto props = [](const std::string& params) {
    auto o = parse_uri("kafka://a:9093/t?group=g&" + params);
    EXPECT_TRUE(o.ok()) << params << ": " << o.status().to_string();
    return o.ok() ? o->properties : P{};
  };
  const P verify{{"enable.ssl.certificate.verification", "true"}, {"ssl.endpoint.identification.algorithm", "https"}};
  auto with = [](P head, const P& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  EXPECT_EQ(props("tls_ca=/dev/null"), with({{"security.protocol", "SSL"}, {"ssl.ca.location", "/dev/null"}}, verify));
  EXPECT_EQ(props("tls=1"), with({{"security.protocol", "SSL"}}, verify));
  EXPECT_EQ(props("security_protocol=SSL"), with({{"security.protocol", "SSL"}}, verify));
  EXPECT_EQ(props("sasl_mechanism=SCRAM-SHA-512&sasl_username=u&sasl_password=p&tls=1"),
            with({{"security.protocol", "SASL_SSL"},
                  {"sasl.mechanisms", "SCRAM-SHA-512"},
                  {"sasl.username", "u"},
                  {"sasl.password", "p"}},
                 verify));
  EXPECT_EQ(props("sasl_mechanism=PLAIN&sasl_username=u&sasl_password=p"),
            (P{{"security.protocol", "SASL_PLAINTEXT"},
               {"sasl.mechanisms", "PLAIN"},
               {"sasl.username", "u"},
               {"sasl.password", "p"}}));
  EXPECT_EQ(props("tls_insecure=1&rdkafka.ssl.endpoint.identification.algorithm=https"),
            (P{{"security.protocol", "SSL"},
               {"enable.ssl.certificate.verification", "false"},
               {"ssl.endpoint.identification.algorithm", "none"},
               {"ssl.endpoint.identification.algorithm", "https"}}));
  EXPECT_EQ(props(""), P{});
  for (const char* bad : {"security_protocol=PLAINTEXT&tls=1", "security_protocol=SSL&sasl_mechanism=PLAIN",
                          "security_protocol=SASL_PLAINTEXT&tls_ca=/dev/null", "sasl_username=u&sasl_password=p",
                          "tls_cert=/dev/null", "tls=0&tls_ca=/dev/null", "tls_ca=/no/such/ca.pem"}) {
    auto o = parse_uri(std::string("kafka://a:9093/t?group=g&") + bad);
    EXPECT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().message().find("p&"), std::string::npos);
  }
}

}  // namespace
}  // namespace idem::kafka
