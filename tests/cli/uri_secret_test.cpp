// Passwords in store and broker URIs are never printed: redact_uri / scrub_secrets,
// open_store's and the broker parser's errors, and the idem command's output, for
// every scheme, and against a real Redis server that refuses the password.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/cli_store.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/open_store.hpp"
#ifdef IDEM_CLI_WITH_REDIS
#include "support/redis_server.hpp"
#endif
#ifdef IDEM_CLI_WITH_BROKERS
#include "idem/redis_stream_source.hpp"
#endif
#ifdef IDEM_CLI_WITH_RABBITMQ
#include "idem/rabbitmq_source.hpp"
#endif
#ifdef IDEM_CLI_WITH_NATS
#include "idem/nats_source.hpp"
#endif

namespace idem::cli {
namespace {

TEST(UriSecret, ThePasswordOfTheUserPartIsHidden) {
  EXPECT_EQ(redact_uri("redis://:secret@host:6379/0"), "redis://:***@host:6379/0");
  EXPECT_EQ(redact_uri("redis://alice:secret@host:6379?prefix=a@b"), "redis://alice:***@host:6379?prefix=a@b");
  EXPECT_EQ(redact_uri("redis://secret@host:6379"), "redis://***@host:6379");
  EXPECT_EQ(redact_uri("postgres://alice@host/db"), "postgres://alice@host/db") << "a user name alone";
  EXPECT_EQ(redact_uri("postgresql://alice:pw@host/db"), "postgresql://alice:***@host/db");
  EXPECT_EQ(redact_uri("amqp://guest@host:5672/%2F?queue=q"), "amqp://guest@host:5672/%2F?queue=q");
  EXPECT_EQ(redact_uri("nats://alice@host:4222?stream=s"), "nats://alice@host:4222?stream=s");
  EXPECT_EQ(redact_uri("//secret@host:1"), "//***@host:1") << "no scheme: taken for a password";
  EXPECT_EQ(redact_uri("redis://alice:p@ss@host:1,other:2"), "redis://alice:***@host:1,other:2");
  EXPECT_EQ(redact_uri("redis://host:6379"), "redis://host:6379");
  EXPECT_EQ(redact_uri("sqlite:/data/a@b.db"), "sqlite:/data/a@b.db") << "a path has no user part";
  EXPECT_EQ(redact_uri("redis://u:pw%40x@host:1"), "redis://u:***@host:1");
  EXPECT_EQ(redact_uri("redis://u:pw%40host:1"), "redis://u:***%40host:1") << "%40 decodes to '@'";
  EXPECT_EQ(redact_uri("redis:%2F%2Fu:pw@host:1"), "redis:%2F%2Fu:***@host:1") << "as the parser decodes it";
  EXPECT_EQ(redact_uri("//u:pw@host:1"), "//u:***@host:1") << "no scheme";
  EXPECT_EQ(redact_uri("redis://[::1]:6379/0"), "redis://[::1]:6379/0");
  EXPECT_EQ(redact_uri("redis://u:secret/0"), "redis://u:***/0") << "a user part whose '@' was forgotten";
  EXPECT_EQ(redact_uri("redis-stream://u:secret@h:1/s?group=g"), "redis-stream://u:***@h:1/s?group=g");
}

TEST(UriSecret, APasswordParameterIsHidden) {
  EXPECT_EQ(redact_uri("postgres://h/db?schema=s&password=secret&sslmode=disable"),
            "postgres://h/db?schema=s&password=***&sslmode=disable");
  EXPECT_EQ(redact_uri("postgres://u:one@h/db?password=two"), "postgres://u:***@h/db?password=***");
  EXPECT_EQ(redact_uri("postgres://h/db?pass%77ord=secret"), "postgres://h/db?pass%77ord=***") << "decoded name";
  EXPECT_EQ(redact_uri("postgres://h/db?password="), "postgres://h/db?password=") << "nothing to hide";
  EXPECT_EQ(redact_uri("postgres://h/db?pass=x&user=u"), "postgres://h/db?pass=x&user=u") << "other parameters";
  EXPECT_EQ(redact_uri("kafka://h:1/t?sasl_password=a&rdkafka.ssl.key.password=b&rdkafka.x.client.secret=c&token=d"),
            "kafka://h:1/t?sasl_password=***&rdkafka.ssl.key.password=***&rdkafka.x.client.secret=***&token=***")
      << "every name that holds password, secret or token";
  const std::string uri = "postgres://h/db?password=s%65cret";
  EXPECT_EQ(scrub_secrets("FATAL: password secret for " + uri, uri),
            "FATAL: password *** for postgres://h/db?password=***");
}

TEST(UriSecret, TheSharedAuthorityPartsParse) {
  std::string_view rest = "al:ic:e@x@h:1/p";
  auto u = take_userinfo(&rest);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->user, "al");
  EXPECT_EQ(u->password.value_or("-"), "ic:e@x") << "up to the last '@', split at the first ':'";
  EXPECT_EQ(rest, "h:1/p");
  std::string_view bare = "h:1";
  EXPECT_FALSE(take_userinfo(&bare).has_value());
  EXPECT_EQ(bare, "h:1");
  auto hp = parse_host_port("[::1]:6379");
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->host, "[::1]");
  EXPECT_EQ(hp->port, 6379);
  for (const char* bad : {"h:0", "h:65536", "h:", "h:12x", ":1", "hunter2"}) {
    auto r = parse_host_port(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().find(bad), std::string::npos) << "never echoed: " << r.status().message();
  }
}

TEST(UriSecret, MessagesLoseTheUriPasswordAsWrittenAndDecoded) {
  const std::string uri = "redis://alice:s%65cret@host:6379";
  EXPECT_EQ(scrub_secrets("cannot open " + uri + ": AUTH secret refused", uri),
            "cannot open redis://alice:***@host:6379: AUTH *** refused");
  EXPECT_EQ(scrub_secrets("no secret here", "redis://host:1"), "no secret here");
}

// Every scheme, written with a password and made to fail (a bad parameter, a path that
// cannot be created, a server that is not there, a mistyped URI).
const std::vector<std::string>& failing_uris() {
  static const std::vector<std::string> uris = {
      "//u:hunter2@nowhere",
      "memory://u:hunter2@x?bogus=1",
      "sqlite://u:hunter2@/nonexistent-idem-dir/a/b.db",
      "sqlite://u:hunter2@/tmp/x.db?leases=hunter2",
      "rocksdb://u:hunter2@/nonexistent-idem-dir/a/b",
      "bloom://u:hunter2@/nonexistent-idem-dir/a/snap?capacity=0",
      "bloom+sqlite://u:hunter2@/nonexistent-idem-dir/a/b.db",
      "bloom+rocksdb://u:hunter2@/nonexistent-idem-dir/a/b",
      "redis://u:hunter2@127.0.0.1:1/0",
      "redis://hunter2@127.0.0.1:1",
      "redis://:hunt%65r2@127.0.0.1:1",
      "redis://u:hunter2@127.0.0.1:1/0?bogus=1",
      "redis://u:hunter2@127.0.0.1:1/x",
      "redis://u:hunter2/0",
      "redis://u:hunter2@127.0.0.1:1%zz",
      "REDIS://U:hunter2@127.0.0.1:1",
  };
  return uris;
}

bool leaks(const std::string& text) {
  return text.find("hunter2") != std::string::npos || text.find("hunt%65r2") != std::string::npos;
}

TEST(UriSecret, OpenStoreErrorsNeverCarryThePassword) {
  for (const std::string& uri : failing_uris()) {
    auto store = open_store(uri);
    ASSERT_FALSE(store.ok()) << uri;
    EXPECT_FALSE(leaks(store.status().to_string())) << store.status().to_string();
  }
}

#ifdef IDEM_CLI_WITH_BROKERS
TEST(UriSecret, BrokerUriErrorsNeverCarryThePassword) {
  for (const std::string uri : {"redis-stream://u:hunter2@127.0.0.1:x/s?group=g", "redis-stream://u:hunter2/s?group=g",
                                "redis-stream://u:hunter2@h:1/s?group=g&bogus=1", "redis-stream://hunter2@h:1",
                                "redis-stream://u:hunter2@h:1%z"}) {
    auto o = redis_streams::parse_uri(uri);
    ASSERT_FALSE(o.ok()) << uri;
    EXPECT_FALSE(leaks(o.status().to_string())) << o.status().to_string();
  }
}
#endif

#ifdef IDEM_CLI_WITH_RABBITMQ
TEST(UriSecret, AmqpUriErrorsNeverCarryThePassword) {
  for (const std::string uri :
       {"amqp://u:hunter2@127.0.0.1:x/v?queue=q", "amqp://u:hunter2/v?queue=q", "amqp://u:hunter2@h?queue=q&bogus=1",
        "amqp://u:hunter2@h", "amqp://u:hunter2@h?queue=q&prefetch=hunter2", "amqp://u:hunter2%zz@h?queue=q"}) {
    auto o = rabbitmq::parse_uri(uri);
    ASSERT_FALSE(o.ok()) << uri;
    EXPECT_FALSE(leaks(o.status().to_string())) << o.status().to_string();
  }
}
#endif

#ifdef IDEM_CLI_WITH_NATS
TEST(UriSecret, NatsUriErrorsNeverCarryThePassword) {
  for (const std::string uri :
       {"nats://u:hunter2@127.0.0.1:x?stream=s", "nats://u:hunter2?stream=s", "nats://u:hunter2@h:1?stream=s&bogus=1",
        "nats://u:hunter2@h:1", "nats://u:hunter2@h:1/path?stream=s",
        "nats://u:hunter2@h:1?stream=s&max_ack_pending=0"}) {
    auto o = nats::parse_uri(uri);
    ASSERT_FALSE(o.ok()) << uri;
    EXPECT_FALSE(leaks(o.status().to_string())) << o.status().to_string();
  }
}
#endif

TEST(UriSecret, NoCommandPrintsThePasswordOfAnyScheme) {
  using testing::run_idem;
  const testing::TempDir dir;
  const std::string trace_file = dir.write("trace.jsonl", "{\"id\":\"a\"}\n");
  for (const std::string& uri : failing_uris()) {
    for (const testing::Lines& args :
         {testing::Lines{"replay", "--store", uri, trace_file}, testing::Lines{"inspect", "--store", uri},
          testing::Lines{"purge", "--store", uri, "--expired"}}) {
      const testing::RunResult r = run_idem(args);
      EXPECT_NE(r.exit_code, 0) << uri;
      EXPECT_FALSE(leaks(r.err)) << r.err;
      EXPECT_FALSE(leaks(r.out)) << r.out;
    }
  }
#ifdef IDEM_CLI_WITH_BROKERS
  for (const std::string source : {
           "redis-stream://u:hunter2@127.0.0.1:1/s?group=g",
           "redis-stream://u:hunter2@127.0.0.1:x/s?group=g",
           "redis-stream://u:hunter2/s?group=g",
           "redis-stream://u:hunter2@127.0.0.1:1/s?group=g&bogus=1",
#ifdef IDEM_CLI_WITH_RABBITMQ
           "amqp://u:hunter2@127.0.0.1:1/v?queue=q",
           "amqp://u:hunter2/v?queue=q",
#endif
#ifdef IDEM_CLI_WITH_NATS
           "nats://u:hunter2@127.0.0.1:1?stream=s",
           "nats://u:hunter2?stream=s",
#endif
       }) {
    for (const testing::Lines& args :
         {testing::Lines{"consume", "--source", source, "--store", "memory:", "--source-wait-ms", "0"},
          testing::Lines{"consume", "--source", source, "--store", "redis://u:hunter2@127.0.0.1:1", "--source-wait-ms",
                         "0"},
          testing::Lines{"publish", "--to", source, trace_file}}) {
      const testing::RunResult r = run_idem(args);
      EXPECT_NE(r.exit_code, 0) << source;
      EXPECT_FALSE(leaks(r.err)) << r.err;
      EXPECT_FALSE(leaks(r.out)) << r.out;
    }
  }
#endif
}

#ifdef IDEM_CLI_WITH_REDIS
// A real server that refuses the password: its error reaches the user, the password
// does not. The right password works and is not printed either.
TEST(UriSecret, ARealServerRefusingThePasswordDoesNotMakeItPrinted) {
  using testing::run_idem;
  redis_test::ServerConfig config;
  config.password = "right-hunter2";
  auto server = redis_test::RedisServer::start(config);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string at = "127.0.0.1:" + std::to_string((*server)->port());
  const testing::TempDir dir;
  const std::string trace_file = dir.write("trace.jsonl", "{\"id\":\"a\"}\n");
  for (const std::string& uri : {"redis://u:wrong-hunter2@" + at, "redis://wrong-hunter2@" + at + "/0"}) {
    const testing::RunResult r = run_idem({"replay", "--store", uri, trace_file});
    EXPECT_EQ(r.exit_code, 1) << "a refused password is the store failing, not a bad option: " << r.err;
    EXPECT_NE(r.err.find("WRONGPASS"), std::string::npos) << r.err;
    EXPECT_FALSE(leaks(r.err)) << r.err;
  }
  const testing::RunResult ok = run_idem({"replay", "--store", "redis://right-hunter2@" + at, trace_file});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(leaks(ok.err + ok.out)) << ok.err << ok.out;
  const testing::RunResult shown = run_idem({"inspect", "--store", "redis://right-hunter2@" + at});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_FALSE(leaks(shown.err + shown.out)) << shown.out;
#ifdef IDEM_CLI_WITH_BROKERS
  const std::string source = "redis-stream://wrong-hunter2@" + at + "/s?group=g";
  for (const testing::Lines& args : {testing::Lines{"consume", "--source", source, "--store", "memory:"},
                                     testing::Lines{"publish", "--to", source, trace_file}}) {
    const testing::RunResult r = run_idem(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("WRONGPASS"), std::string::npos) << r.err;
    EXPECT_FALSE(leaks(r.err + r.out)) << r.err;
  }
#endif
}

TEST(UriSecret, TheCommandsNeverPrintAPassword) {
  using testing::run_idem;
  // Nothing listens on port 1: every command fails to connect and says so.
  for (const std::string uri : {"redis://:hunter2@127.0.0.1:1", "redis://alice:hunter2@127.0.0.1:1/0",
                                "redis://hunter2@127.0.0.1:1", "redis://:hunt%65r2@127.0.0.1:1"}) {
    for (const testing::Lines& args :
         {testing::Lines{"inspect", "--store", uri}, testing::Lines{"inspect", "--store", uri, "--id", "x"},
          testing::Lines{"purge", "--store", uri, "--expired"}, testing::Lines{"replay", "--store", uri}}) {
      const testing::RunResult r = run_idem(args);
      EXPECT_EQ(r.exit_code, 1) << uri << ": " << r.err;
      EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("hunt%65r2"), std::string::npos) << r.err;
      EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;
    }
  }
}
#endif

}  // namespace
}  // namespace idem::cli
