// `idem publish` and `idem consume` against nats-server with TLS: with the right CA and
// a password, a token or a client certificate it works; a wrong CA, a name the
// certificate does not carry, plaintext against TLS, a missing client certificate and
// wrong credentials are refused at once in one line without the secret; tls_insecure
// works and warns.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/nats_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::nats_tls_test {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using nats_test::NatsServer;
using test_support::TlsFiles;

constexpr char kPassword[] = "tls-hunter2";
constexpr char kToken[] = "tok-hunter2";

struct Outcome {
  int rc = -1;
  std::string text;  // stderr and stdout
  std::chrono::milliseconds took{0};
};

class NatsTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("nats-tls");
    std::string error;
    files_ = test_support::make_tls_files(dir_->sub("tls"), &error);
    ASSERT_TRUE(files_.has_value()) << error;
    std::ofstream(dir_->sub("password")) << kPassword << '\n';
    std::ofstream(dir_->sub("token")) << kToken;
  }
  static void TearDownTestSuite() {
    files_.reset();
    delete dir_;
    dir_ = nullptr;
  }

  static Outcome idem(const std::vector<std::string>& args) {
    const std::string log = dir_->sub("run.log");
    std::remove(log.c_str());
    const auto start = std::chrono::steady_clock::now();
    Outcome r;
    r.rc = wait_exit(spawn_idem(args, log), std::chrono::seconds(30));
    r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    std::ifstream f(log);
    r.text.assign(std::istreambuf_iterator<char>(f), {});
    return r;
  }
  static Outcome publish(const std::string& uri) {
    std::ofstream(dir_->sub("in.jsonl")) << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
    return idem({"publish", "--to", uri, dir_->sub("in.jsonl")});
  }
  static Outcome consume(const std::string& uri) {
    return idem({"consume", "--source", uri, "--store", "sqlite:" + dir_->sub("db"), "--idle-exit-ms", "1000",
                 "--source-wait-ms", "0"});
  }
  // Refused at start: exit 1 in one line, no secret, no wait.
  static void expect_refused(const Outcome& r, const std::string& why) {
    EXPECT_EQ(r.rc, 1) << why << ": " << r.text;
    const auto warnings = static_cast<std::ptrdiff_t>(r.text.find("warning:") == std::string::npos ? 0 : 1);
    EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n') - warnings, 1) << why << ": " << r.text;
    EXPECT_NE(r.text.find("idem consume: "), std::string::npos) << why << ": " << r.text;
    EXPECT_LT(r.took, std::chrono::seconds(10)) << why;
    for (const char* secret : {kPassword, kToken, test_support::kClientKeyPassword})
      EXPECT_EQ(r.text.find(secret), std::string::npos) << why << ": " << r.text;
  }
  static std::string at(const NatsServer& s, const std::string& host = "127.0.0.1") {
    return host + ":" + std::to_string(s.port());
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::optional<TlsFiles> files_;
};

TEST_F(NatsTls, APasswordOverVerifiedTlsWorksAndEveryMismatchIsRefused) {
  auto server = NatsServer::start({.user = "app",
                                   .password = kPassword,
                                   .tls_cert = files_->server_cert,
                                   .tls_key = files_->server_key});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string base = "nats://app@" + at(**server) + "?stream=s&password_file=" + dir_->sub("password");
  const Outcome sent = publish(base + "&tls_ca=" + files_->ca);
  ASSERT_EQ(sent.rc, 0) << sent.text;
  const Outcome got = consume(base + "&durable=g&tls_ca=" + files_->ca);
  ASSERT_EQ(got.rc, 0) << got.text;
  auto counts = (*server)->consumer("s", "g");
  ASSERT_TRUE(counts.ok()) << counts.status().to_string();
  EXPECT_EQ((*server)->messages("s")->size(), 3u);
  EXPECT_EQ(counts->pending + static_cast<std::uint64_t>(counts->ack_pending), 0u) << "all three consumed over TLS";
  const Outcome by_name = publish("tls://app@" + at(**server, "localhost") + "?stream=s&password_file=" +
                              dir_->sub("password") + "&tls_ca=" + files_->ca);
  EXPECT_EQ(by_name.rc, 0) << "tls:// and a DNS name: " << by_name.text;

  expect_refused(consume(base + "&durable=g&tls_ca=" + files_->other_ca), "a CA that did not sign it");
  expect_refused(consume(base + "&durable=g&tls=1"), "the system's trust store, which does not hold the test CA");
  ASSERT_EQ(::setenv("SSL_CERT_FILE", files_->ca.c_str(), 1), 0);  // OpenSSL's default verify paths
  const Outcome trusted = consume(base + "&durable=g&tls=1");
  ::unsetenv("SSL_CERT_FILE");
  EXPECT_EQ(trusted.rc, 0) << "the test CA in the system's trust store: " << trusted.text;
  expect_refused(consume(base + "&durable=g"), "plaintext against TLS");
  ASSERT_EQ(::setenv("IDEM_TEST_WRONG", "wrong-hunter2", 1), 0);
  expect_refused(consume("nats://app@" + at(**server) + "?stream=s&durable=g&password_env=IDEM_TEST_WRONG&tls_ca=" +
                         files_->ca),
                 "a wrong password");
  const Outcome insecure = consume(base + "&durable=g&tls_ca=" + files_->other_ca + "&tls_insecure=1");
  EXPECT_EQ(insecure.rc, 0) << insecure.text;
  EXPECT_NE(insecure.text.find("idem consume: warning: tls_insecure=1"), std::string::npos) << insecure.text;
}

TEST_F(NatsTls, AClientCertificateAndATokenWhereTheServerVerifiesClients) {
  auto server = NatsServer::start({.token = kToken,
                                   .tls_cert = files_->server_cert,
                                   .tls_key = files_->server_key,
                                   .tls_ca = files_->ca,
                                   .tls_verify = true});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string base = "nats://" + at(**server) + "?stream=s&durable=g&tls_ca=" + files_->ca;
  const std::string with_cert = base + "&tls_cert=" + files_->client_cert + "&tls_key=" + files_->client_key;
  const Outcome ok = consume(with_cert + "&token_file=" + dir_->sub("token"));
  EXPECT_EQ(ok.rc, 0) << ok.text;
  expect_refused(consume(base + "&token_file=" + dir_->sub("token")), "no client certificate");
  expect_refused(consume(with_cert + "&token=wrong-hunter2"), "a wrong token");
  const Outcome bad_key = consume(base + "&tls_cert=" + files_->client_cert + "&tls_key=" + dir_->sub("absent"));
  EXPECT_EQ(bad_key.rc, 2) << "a key file that is not there is a usage error: " << bad_key.text;
  const Outcome off = consume(base + "&tls=0");
  EXPECT_EQ(off.rc, 2) << "tls=0 beside tls_ca: " << off.text;
  EXPECT_NE(off.text.find("tls=0 beside"), std::string::npos) << off.text;
}

TEST_F(NatsTls, AServerWhoseCertificateNamesAnotherHostIsRefused) {
  auto server = NatsServer::start({.tls_cert = files_->wrong_host_cert, .tls_key = files_->server_key});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string base = "nats://" + at(**server) + "?stream=s&durable=g&tls_ca=" + files_->ca;
  expect_refused(consume(base), "a certificate for elsewhere.invalid");
  const Outcome insecure = consume(base + "&tls_insecure=1");
  EXPECT_EQ(insecure.rc, 0) << insecure.text;
}

}  // namespace
}  // namespace idem::nats_tls_test
