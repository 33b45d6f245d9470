// `idem publish` and `idem consume` over amqps:// to the shared node's TLS listener:
// with the right CA (or the system's trust store) and a password by file it works,
// by IP address and by DNS name, with a client certificate too (an encrypted key by
// its password file); a CA that did not sign the server's certificate, an address the
// certificate does not name (127.0.0.2), plaintext against the TLS port and a wrong
// password are refused at once in one line without the secret; tls_insecure works and
// warns.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/rabbitmq_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::rabbitmq_tls_test {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using rabbitmq_test::RabbitServer;

struct Outcome {
  int rc = -1;
  std::string text;  // stderr and stdout
  std::chrono::milliseconds took{0};
};

class RabbitTls : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &RabbitServer::shared();
    ASSERT_NE(server_->tls_port(), 0);
    std::ofstream(dir_.sub("password")) << "guest\n";
    std::ofstream(dir_.sub("key-password")) << test_support::kClientKeyPassword;
    std::ofstream(dir_.sub("in.jsonl")) << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
  }

  Outcome idem(const std::vector<std::string>& args) {
    const std::string log = dir_.sub("run.log");
    std::remove(log.c_str());
    const auto start = std::chrono::steady_clock::now();
    Outcome r;
    r.rc = wait_exit(spawn_idem(args, log), std::chrono::seconds(30));
    r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    std::ifstream f(log);
    r.text.assign(std::istreambuf_iterator<char>(f), {});
    return r;
  }
  Outcome publish(const std::string& uri) { return idem({"publish", "--to", uri, dir_.sub("in.jsonl")}); }
  Outcome consume(const std::string& uri) {
    return idem({"consume", "--source", uri, "--store", "sqlite:" + dir_.sub("db"), "--idle-exit-ms", "1000",
                 "--source-wait-ms", "0"});
  }
  // "amqps://guest@HOST:TLS_PORT/%2F?queue=Q&password_file=…&" + params.
  std::string uri(const std::string& queue, const std::string& params, const std::string& host = "127.0.0.1") {
    return "amqps://guest@" + host + ":" + std::to_string(server_->tls_port()) + "/%2F?queue=" + queue +
           "&password_file=" + dir_.sub("password") + (params.empty() ? "" : "&" + params);
  }
  std::string ca() const { return "tls_ca=" + server_->tls().ca; }
  // Refused at start: exit 1 in one line (beside a warning), no secret, no wait.
  static void expect_refused(const Outcome& r, const std::string& why) {
    EXPECT_EQ(r.rc, 1) << why << ": " << r.text;
    const auto warnings = static_cast<std::ptrdiff_t>(r.text.find("warning:") == std::string::npos ? 0 : 1);
    EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n') - warnings, 1) << why << ": " << r.text;
    EXPECT_LT(r.took, std::chrono::seconds(10)) << why;
    EXPECT_EQ(r.text.find(test_support::kClientKeyPassword), std::string::npos) << r.text;
  }

  RabbitServer* server_ = nullptr;
  testing::TempDir dir_{"rabbit-tls"};
};

TEST_F(RabbitTls, APasswordOverVerifiedTlsWorksByAddressAndByName) {
  const Outcome sent = publish(uri("tls-a", ca()));
  ASSERT_EQ(sent.rc, 0) << sent.text;
  ASSERT_EQ(server_->ready("tls-a").value_or(0), 3u) << "three messages published over TLS";
  const Outcome got = consume(uri("tls-a", ca()));
  ASSERT_EQ(got.rc, 0) << got.text;
  EXPECT_EQ(server_->ready("tls-a").value_or(99), 0u) << "all three consumed over TLS";
  const Outcome by_name = publish(uri("tls-a", ca(), "localhost"));
  EXPECT_EQ(by_name.rc, 0) << "a DNS name: " << by_name.text;
  ASSERT_EQ(::setenv("SSL_CERT_FILE", server_->tls().ca.c_str(), 1), 0);  // OpenSSL's default verify paths
  const Outcome trusted = publish(uri("tls-a", ""));
  ::unsetenv("SSL_CERT_FILE");
  EXPECT_EQ(trusted.rc, 0) << "the test CA in the system's trust store: " << trusted.text;
}

TEST_F(RabbitTls, EveryMismatchIsRefusedAndTlsInsecureWarns) {
  expect_refused(consume(uri("tls-b", "tls_ca=" + server_->tls().other_ca)), "a CA that did not sign it");
  expect_refused(consume(uri("tls-b", "")), "the system's trust store, which does not hold the test CA");
  expect_refused(consume(uri("tls-b", ca(), "127.0.0.2")), "an address the certificate does not name");
  expect_refused(consume("amqp://guest@127.0.0.1:" + std::to_string(server_->tls_port()) +
                         "/%2F?queue=tls-b&password_file=" + dir_.sub("password")),
                 "plaintext against the TLS port");
  ASSERT_EQ(::setenv("IDEM_TEST_WRONG", "wrong-pw", 1), 0);
  expect_refused(consume("amqps://guest@127.0.0.1:" + std::to_string(server_->tls_port()) +
                         "/%2F?queue=tls-b&password_env=IDEM_TEST_WRONG&" + ca()),
                 "a wrong password");
  const Outcome insecure = publish(uri("tls-b", "tls_insecure=1", "127.0.0.2"));
  EXPECT_EQ(insecure.rc, 0) << insecure.text;
  EXPECT_NE(insecure.text.find("idem publish: warning: tls_insecure=1"), std::string::npos) << insecure.text;
}

TEST_F(RabbitTls, AClientCertificateIsSentAndItsKeyPasswordReadFromAFile) {
  const auto& t = server_->tls();
  const Outcome plain_key = publish(uri("tls-c", ca() + "&tls_cert=" + t.client_cert + "&tls_key=" + t.client_key));
  EXPECT_EQ(plain_key.rc, 0) << plain_key.text;
  const Outcome encrypted = publish(uri("tls-c", ca() + "&tls_cert=" + t.client_cert + "&tls_key=" +
                                                     t.client_key_encrypted + "&tls_key_password_file=" +
                                                     dir_.sub("key-password")));
  EXPECT_EQ(encrypted.rc, 0) << encrypted.text;
  EXPECT_EQ(server_->ready("tls-c").value_or(0), 6u);
  const Outcome wrong = publish(uri("tls-c", ca() + "&tls_cert=" + t.client_cert + "&tls_key=" +
                                                 t.client_key_encrypted + "&tls_key_password=nope"));
  EXPECT_EQ(wrong.rc, 2) << "a key its password does not open: " << wrong.text;
}

// SASL EXTERNAL: the node takes the user from the client certificate's CN
// (idem-client, a user without a password); no password is sent or needed. A
// certificate whose CN is no user of the node is refused, and EXTERNAL without a
// client certificate is a usage error.
TEST_F(RabbitTls, ExternalLogsInByTheClientCertificateAlone) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"add_user", "idem-client", "unused-pw-hunter2"},
        {"clear_password", "idem-client"},
        {"set_permissions", "-p", "/", "idem-client", ".*", ".*", ".*"}}) {
    const Status s = server_->ctl(args);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  const auto& t = server_->tls();
  const std::string base = "amqps://127.0.0.1:" + std::to_string(server_->tls_port()) + "/%2F?queue=tls-e&" + ca();
  const std::string cert = "&tls_cert=" + t.client_cert + "&tls_key=" + t.client_key;
  const Outcome sent = publish(base + cert + "&sasl_mechanism=EXTERNAL");
  ASSERT_EQ(sent.rc, 0) << sent.text;
  const Outcome got = consume(base + cert + "&sasl_mechanism=EXTERNAL");
  ASSERT_EQ(got.rc, 0) << got.text;
  EXPECT_EQ(server_->ready("tls-e").value_or(99), 0u) << "all three consumed by the certificate's user";
  const Status deleted = server_->ctl({"delete_user", "idem-client"});
  ASSERT_TRUE(deleted.ok()) << deleted.to_string();
  expect_refused(consume(base + cert + "&sasl_mechanism=EXTERNAL"), "a certificate whose CN is no user");
  const Outcome no_cert = consume(base + "&sasl_mechanism=EXTERNAL");
  EXPECT_EQ(no_cert.rc, 2) << "EXTERNAL without a client certificate: " << no_cert.text;
}

}  // namespace
}  // namespace idem::rabbitmq_tls_test
