// The Redis store over TLS against real redis-servers with --tls-port: with the right
// CA (a file, or the system's trust store) it claims and commits, by IP address and by
// DNS name; a CA that did not sign the server's certificate, a certificate for another
// name, plaintext against TLS, and a missing client certificate where the server
// requires one are refused at once (TLS against a plaintext server at the command
// timeout), naming the cause and never the password; tls_insecure connects anyway.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "idem/redis_store.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::redis_tls_test {
namespace {

using redis_test::RedisServer;
using redis_test::ServerConfig;
using test_support::TlsFiles;

constexpr char kPassword[] = "tls-hunter2";

class RedisTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("redis-tls");
    std::string error;
    files_ = test_support::make_tls_files(dir_->sub("tls"), &error);
    ASSERT_TRUE(files_.has_value()) << error;
    std::ofstream(dir_->sub("password")) << kPassword << '\n';
    std::ofstream(dir_->sub("key-password")) << test_support::kClientKeyPassword << '\n';
  }
  static void TearDownTestSuite() {
    files_.reset();
    delete dir_;
    dir_ = nullptr;
  }

  static std::unique_ptr<RedisServer> start(ServerConfig c) {
    c.password = kPassword;
    auto s = RedisServer::start(std::move(c));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static ServerConfig tls_server(const std::string& cert) {
    ServerConfig c;
    c.tls_cert = cert;
    c.tls_key = files_->server_key;
    c.tls_ca = files_->ca;
    return c;
  }
  // "SCHEME://HOST:PORT?password_file=…" plus `more`.
  static std::string uri(const RedisServer& s, const std::string& more, const std::string& scheme = "rediss",
                         const std::string& host = "127.0.0.1") {
    return scheme + "://" + host + ":" + std::to_string(s.port()) + "?password_file=" + dir_->sub("password") + more;
  }
  // A claim and a commit of each of n ids, then each id's duplicate.
  static void expect_claims_and_commits(redis::RedisStore& store, int n) {
    const TimePoint now = SystemClock().now();
    for (int i = 0; i < n; ++i) {
      const std::string id = "tls-" + std::to_string(++ids_);
      auto c = store.claim({id, "me", Duration(10'000), std::nullopt, now, std::nullopt});
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      ASSERT_EQ(c->status, ClaimStatus::kNew);
      CommitRequest commit;
      commit.id = id;
      commit.owner = "me";
      commit.now = now;
      commit.ttl = Duration(60'000);
      ASSERT_TRUE(store.commit(commit).ok());
      auto again = store.claim({id, "other", Duration(10'000), std::nullopt, now, std::nullopt});
      ASSERT_TRUE(again.ok()) << again.status().to_string();
      EXPECT_EQ(again->status, ClaimStatus::kCompleted);
    }
  }
  static StatusOr<std::shared_ptr<redis::RedisStore>> open(const std::string& text) {
    auto u = StoreUri::parse(text);
    if (!u.ok()) return u.status();
    auto o = redis::parse_uri(*u);
    if (!o.ok()) return o.status();
    o->connect_timeout = Duration(2000);
    o->command_timeout = Duration(2000);
    return redis::open(*o);
  }
  // A claim, its commit, and the duplicate's claim, over the store.
  static void expect_works(const std::string& text) {
    auto store = open(text);
    ASSERT_TRUE(store.ok()) << text << ": " << store.status().to_string();
    expect_claims_and_commits(**store, 1);
  }
  // Refused with `code` within a few seconds, the message naming `cause`, without the
  // password.
  static void expect_refused(const std::string& text, StatusCode code, const std::string& cause) {
    const auto start = std::chrono::steady_clock::now();
    auto store = open(text);
    ASSERT_FALSE(store.ok()) << text;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << text;
    EXPECT_EQ(store.status().code(), code) << store.status().to_string();
    EXPECT_NE(store.status().message().find(cause), std::string::npos) << store.status().to_string();
    for (const char* secret : {kPassword, test_support::kClientKeyPassword})
      EXPECT_EQ(store.status().message().find(secret), std::string::npos) << store.status().to_string();
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::optional<TlsFiles> files_;
  static inline int ids_ = 0;
};

TEST_F(RedisTls, AStoreOverVerifiedTlsWorksAndEveryMismatchIsRefused) {
  auto server = start(tls_server(files_->server_cert));
  ASSERT_NE(server, nullptr);
  const std::string ca = "&tls_ca=" + files_->ca;
  expect_works(uri(*server, ca));
  expect_works(uri(*server, ca, "rediss", "localhost"));
  expect_works(uri(*server, ca, "redis"));  // a tls_* parameter asks for TLS too

  expect_refused(uri(*server, "&tls_ca=" + files_->other_ca), StatusCode::kFailedPrecondition,
                 "the server's certificate is not accepted");
  expect_refused(uri(*server, ""), StatusCode::kFailedPrecondition, "the server's certificate is not accepted");
  ASSERT_EQ(::setenv("SSL_CERT_FILE", files_->ca.c_str(), 1), 0);  // OpenSSL's default verify paths
  expect_works(uri(*server, ""));
  ::unsetenv("SSL_CERT_FILE");
  auto plain = open(uri(*server, "", "redis"));
  EXPECT_EQ(plain.status().code(), StatusCode::kUnavailable) << "plaintext against TLS: " << plain.status().to_string();
  expect_works(uri(*server, "&tls_ca=" + files_->other_ca + "&tls_insecure=1"));

  auto u = StoreUri::parse(uri(*server, ca + "&tls=0"));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(redis::parse_uri(*u).status().code(), StatusCode::kInvalidArgument) << "tls=0 beside tls_ca";
  expect_refused(uri(*server, "&tls_ca=" + dir_->sub("absent")), StatusCode::kInvalidArgument, "tls_ca");
}

TEST_F(RedisTls, AServerWhoseCertificateNamesAnotherHostIsRefused) {
  auto server = start(tls_server(files_->wrong_host_cert));
  ASSERT_NE(server, nullptr);
  expect_refused(uri(*server, "&tls_ca=" + files_->ca), StatusCode::kFailedPrecondition,
                 "the server's certificate is not accepted");
  expect_works(uri(*server, "&tls_ca=" + files_->ca + "&tls_insecure=1"));
}

TEST_F(RedisTls, TlsAgainstAPlaintextServerIsRefused) {
  auto server = start({});
  ASSERT_NE(server, nullptr);
  // A plaintext server waits for a line's end that a TLS hello never sends: the
  // handshake ends at the command timeout.
  expect_refused(uri(*server, "&tls_ca=" + files_->ca), StatusCode::kUnavailable, "is it a TLS port?");
}

TEST_F(RedisTls, AClientCertificateWhereTheServerRequiresOne) {
  ServerConfig c = tls_server(files_->server_cert);
  c.tls_auth_clients = true;
  c.tls_client_cert = files_->client_cert;
  c.tls_client_key = files_->client_key;
  auto server = start(std::move(c));
  ASSERT_NE(server, nullptr);
  const std::string ca = "&tls_ca=" + files_->ca;
  expect_works(uri(*server, ca + "&tls_cert=" + files_->client_cert + "&tls_key=" + files_->client_key));
  expect_works(uri(*server, ca + "&tls_cert=" + files_->client_cert + "&tls_key=" + files_->client_key_encrypted +
                                "&tls_key_password_file=" + dir_->sub("key-password")));
  expect_refused(uri(*server, ca), StatusCode::kFailedPrecondition, "the server refused this client: ");
  ASSERT_EQ(::setenv("IDEM_TEST_WRONG", "wrong-hunter2", 1), 0);
  expect_refused(uri(*server, ca + "&tls_cert=" + files_->client_cert + "&tls_key=" + files_->client_key_encrypted +
                                  "&tls_key_password_env=IDEM_TEST_WRONG"),
                 StatusCode::kInvalidArgument, "tls_cert and tls_key");
}

// Every node of a Redis Cluster speaks TLS only (its bus too): the store reaches each
// master at the address CLUSTER SLOTS announces, verified, and the ids of 60 claims
// land on all three masters.
TEST_F(RedisTls, AClusterOverTlsVerifiesEveryNode) {
  ServerConfig node = tls_server(files_->server_cert);
  auto cluster = redis_test::RedisCluster::start(3, 0, node);
  ASSERT_TRUE(cluster.ok()) << cluster.status().to_string();
  auto store = open((*cluster)->uri());
  ASSERT_TRUE(store.ok()) << (*cluster)->uri() << ": " << store.status().to_string();
  expect_claims_and_commits(**store, 60);
  for (auto& n : (*cluster)->nodes()) {
    auto keys = n->command({"DBSIZE"});
    ASSERT_TRUE(keys.ok()) << keys.status().to_string();
    EXPECT_GT(keys->integer, 0) << "a master that holds none of the records: the store did not reach it";
  }
  const std::string plain = "redis://127.0.0.1:" + std::to_string((*cluster)->nodes().front()->port()) + "?cluster=1";
  EXPECT_FALSE(open(plain).ok()) << "the nodes speak TLS only";
  std::string other = (*cluster)->uri();
  other.replace(other.find(files_->ca), files_->ca.size(), files_->other_ca);
  expect_refused(other, StatusCode::kFailedPrecondition,
                 "the server's certificate is not accepted");
}

}  // namespace
}  // namespace idem::redis_tls_test
