// Secrets given by reference (NAME_file=, NAME_env=) instead of in a URI's text: every
// parser reads them, every error names the file or the variable and never the secret,
// a running `idem consume` holds none in its command line, and a secret still written
// there works with one warning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "replay/run_idem.hpp"
#ifdef IDEM_CLI_WITH_REDIS
#include "idem/redis_store.hpp"
#include "support/idem_state.hpp"
#include "support/redis_server.hpp"
#endif
#ifdef IDEM_CLI_WITH_BROKERS
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

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

constexpr char kSecret[] = "s3cret-by-reference";

bool leaks(const std::string& text) { return text.find(kSecret) != std::string::npos; }

TEST(SecretRefs, ASecretParameterComesFromAFileOrTheEnvironment) {
  const testing::TempDir dir;
  const std::string file = dir.write("pw", std::string(kSecret) + "\n");
  ASSERT_EQ(::setenv("IDEM_TEST_SECRET", kSecret, 1), 0);
  auto u = StoreUri::parse("redis://app@h:1?password_file=" + file + "&prefix=p");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->param("password").value_or("-"), kSecret) << "one trailing newline dropped";
  EXPECT_FALSE(u->param("password_file").has_value());
  EXPECT_EQ(u->param("prefix").value_or("-"), "p");
  u = StoreUri::parse("kafka://h:1/t?sasl_password_env=IDEM_TEST_SECRET&token_file=" + file);
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->param("sasl_password").value_or("-"), kSecret);
  EXPECT_EQ(u->param("token").value_or("-"), kSecret);
  u = StoreUri::parse("x://h?prefix_file=" + file);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->param("prefix_file").value_or("-"), file) << "only a secret's name is a reference";
  EXPECT_EQ(redact_uri("postgres://app@h/db?password_file=/run/secrets/r"),
            "postgres://app@h/db?password_file=/run/secrets/r")
      << "a path is not a secret";
  EXPECT_FALSE(secret_name("password_env"));
  EXPECT_EQ(secret_reference("sasl_password_file").value_or("-"), "sasl_password");
  EXPECT_FALSE(secret_reference("prefix_file").has_value());
}

TEST(SecretRefs, AReferenceThatCannotBeReadIsRefusedByName) {
  const testing::TempDir dir;
  const std::string file = dir.write("pw", kSecret);
  const std::string empty = dir.write("empty", "\n");
  ASSERT_EQ(::unsetenv("IDEM_TEST_UNSET"), 0);
  struct Case {
    std::string uri, says;
  };
  for (const Case& c : std::vector<Case>{
           {"redis://h:1?password_file=" + dir.path() + "/absent", "/absent\" cannot be read"},
           {"redis://h:1?password_file=" + empty, "is empty"},
           {"redis://h:1?password_file=" + dir.path(), "is not a regular file"},
           {"redis://h:1?password_file=/dev/zero", "is not a regular file"},
           {"redis://h:1?password_env=IDEM_TEST_UNSET", "\"IDEM_TEST_UNSET\" is not set or empty"},
           {"redis://h:1?password=x&password_file=" + file, "password is given twice"},
           {"redis://h:1?password_file=" + file + "&password_env=HOME", "password is given twice"},
       }) {
    auto u = StoreUri::parse(c.uri);
    ASSERT_FALSE(u.ok()) << c.uri;
    EXPECT_NE(u.status().message().find(c.says), std::string::npos) << u.status().message();
    EXPECT_FALSE(leaks(u.status().message())) << u.status().message();
  }
}

#ifdef IDEM_CLI_WITH_REDIS
TEST(SecretRefs, RedisTakesThePasswordParameterAndTheUserPartBesideIt) {
  const testing::TempDir dir;
  const std::string file = dir.write("pw", kSecret);
  auto o = redis::parse_uri(*StoreUri::parse("redis://app@h:1?password_file=" + file));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "app") << "beside the parameter, a lone user part is the user";
  EXPECT_EQ(o->password, kSecret);
  o = redis::parse_uri(*StoreUri::parse("redis://h:1?password_file=" + file));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "");
  EXPECT_EQ(o->password, kSecret);
  o = redis::parse_uri(*StoreUri::parse("redis://pw@h:1"));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->password, "pw") << "alone, it is still the password, as redis-cli -u reads it";
  o = redis::parse_uri(*StoreUri::parse("redis://u:inline@h:1?password_file=" + file));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("given twice"), std::string::npos) << o.status().message();
}
#endif

#ifdef IDEM_CLI_WITH_BROKERS
TEST(SecretRefs, EveryBrokerTakesThePasswordByReference) {
  const testing::TempDir dir;
  const std::string file = dir.write("pw", kSecret);
  auto rs = redis_streams::parse_uri("redis-stream://app@h:1/s?group=g&password_file=" + file);
  ASSERT_TRUE(rs.ok()) << rs.status().to_string();
  EXPECT_EQ(rs->user, "app");
  EXPECT_EQ(rs->password, kSecret);
#ifdef IDEM_CLI_WITH_RABBITMQ
  auto amqp = rabbitmq::parse_uri("amqp://app@h:5672/v?queue=q&password_file=" + file);
  ASSERT_TRUE(amqp.ok()) << amqp.status().to_string();
  EXPECT_EQ(amqp->user, "app");
  EXPECT_EQ(amqp->password, kSecret);
  EXPECT_FALSE(rabbitmq::parse_uri("amqp://app:x@h/v?queue=q&password_file=" + file).ok());
#endif
#ifdef IDEM_CLI_WITH_NATS
  auto nats = nats::parse_uri("nats://app@h:4222?stream=s&password_file=" + file);
  ASSERT_TRUE(nats.ok()) << nats.status().to_string();
  EXPECT_EQ(nats->user, "app");
  EXPECT_EQ(nats->password, kSecret);
  EXPECT_FALSE(nats::parse_uri("nats://h:4222?stream=s&password_file=" + file).ok()) << "a password needs a user";
#endif
}
#endif

#if defined(IDEM_CLI_WITH_REDIS) && defined(IDEM_CLI_WITH_BROKERS)
std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A consumer of a password-protected Redis given its password by file and by
// environment: it connects, and its /proc/PID/cmdline holds no secret.
TEST(SecretRefs, ARunningConsumerHoldsNoSecretInItsCommandLine) {
  redis_test::ServerConfig config;
  config.password = kSecret;
  auto server = redis_test::RedisServer::start(config);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const testing::TempDir dir;
  const std::string file = dir.write("pw", std::string(kSecret) + "\n");
  ASSERT_EQ(::setenv("IDEM_TEST_SECRET", kSecret, 1), 0);
  const std::string at = "127.0.0.1:" + std::to_string((*server)->port());
  for (const std::string& ref : {"password_file=" + file, std::string("password_env=IDEM_TEST_SECRET")}) {
    const std::string log = dir.path() + "/consume.log";
    const std::string& state = testing::idem_state_directory();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      const std::string source = "redis-stream://" + at + "/s?group=g&" + ref;
      const std::string store = "redis://" + at + "/0?" + ref;
      ::setenv("STATE_DIRECTORY", state.c_str(), 1);
      ::execl(IDEM_BINARY, IDEM_BINARY, "consume", "--source", source.c_str(), "--store", store.c_str(),
              "--source-wait-ms", "0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Running means connected: a refused password exits 1 at once.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << ref << " exited: " << read_all(log);
    std::string cmdline = read_all("/proc/" + std::to_string(pid) + "/cmdline");
    EXPECT_NE(cmdline.find("consume"), std::string::npos) << "read the running process's command line";
    EXPECT_FALSE(leaks(cmdline)) << cmdline;
    ::kill(pid, SIGTERM);
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_all(log);
    EXPECT_FALSE(leaks(read_all(log))) << read_all(log);
    EXPECT_EQ(read_all(log).find("warning"), std::string::npos) << read_all(log);
  }
  // Written inline it still works, with one warning that names no secret.
  const std::string inline_source = "redis-stream://:" + std::string(kSecret) + "@" + at + "/s?group=g";
  const testing::RunResult r = testing::run_idem({"consume", "--source", inline_source, "--store",
                                                   "redis://" + at + "/0?password_env=IDEM_TEST_SECRET",
                                                   "--idle-exit-ms", "200"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("idem: warning: argument 3 holds a password or token"), std::string::npos) << r.err;
  EXPECT_FALSE(leaks(r.err + r.out)) << r.err;
}
#endif

}  // namespace
}  // namespace idem::cli
