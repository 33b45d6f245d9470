// The PostgreSQL store over TLS, through libpq's own keywords, on a server that takes
// TLS only: sslmode=verify-full with the right CA and a password, or a client
// certificate (also an encrypted key with its password by file), opens the store;
// a wrong CA, a host name the certificate does not carry, plaintext, a missing client
// certificate and a wrong password are refused with libpq's reason and no secret.
// libpq's default sslmode=prefer encrypts without verifying anything: shown, as
// docs/security.md says.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "idem/open_store.hpp"
#include "pg_test_util.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::postgres_test {
namespace {

class PostgresTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("pg-tls");
    std::string error;
    files_ = test_support::make_tls_files(dir_->sub("tls"), &error);
    ASSERT_TRUE(files_.has_value()) << error;
    std::ofstream(dir_->sub("password")) << kTlsPassword << '\n';
    std::ofstream(dir_->sub("key-password")) << test_support::kClientKeyPassword;
    auto s = PostgresServer::start(
        {.tls_cert = files_->server_cert, .tls_key = files_->server_key, .tls_ca = files_->ca});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }

  // "postgres://USER@HOST:PORT/postgres?schema=tls&" + params.
  static std::string uri(const std::string& user, const std::string& params, const std::string& host = "127.0.0.1") {
    return "postgres://" + user + "@" + host + ":" + std::to_string(server_->port()) + "/postgres?schema=tls&" +
           params;
  }
  static std::string password() { return "password_file=" + dir_->sub("password"); }
  static std::string verify(const std::string& ca) { return "sslmode=verify-full&sslrootcert=" + ca; }

  static void expect_open(const std::string& u) {
    auto s = open_store(u);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const std::string id = "id-" + std::to_string(++claims_);  // ClaimRequest holds views
    ClaimRequest q{id, "A", Duration(1000), std::nullopt, from_unix_ms(1000)};
    EXPECT_EQ((*s)->claim(q)->status, ClaimStatus::kNew);
  }
  static void expect_refused(const std::string& u, const std::string& says) {
    auto s = open_store(u);
    ASSERT_FALSE(s.ok()) << u;
    EXPECT_NE(s.status().message().find(says), std::string::npos) << s.status().message();
    for (const char* secret : {kTlsPassword, test_support::kClientKeyPassword})
      EXPECT_EQ(s.status().message().find(secret), std::string::npos) << s.status().message();
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::optional<test_support::TlsFiles> files_;
  static inline PostgresServer* server_ = nullptr;
  static inline int claims_ = 0;
};

TEST_F(PostgresTls, VerifyFullWithAPasswordOpensAndEveryMismatchIsRefused) {
  ASSERT_NE(server_, nullptr);
  expect_open(uri("idem", verify(files_->ca) + "&" + password()));
  expect_open(uri("idem", verify(files_->ca) + "&" + password(), "localhost"));  // the DNS name, too
  expect_refused(uri("idem", verify(files_->other_ca) + "&" + password()), "certificate verify failed");
  expect_refused(uri("idem", verify(files_->ca) + "&hostaddr=127.0.0.1&" + password(), "elsewhere.invalid"),
                 "does not match host name \"elsewhere.invalid\"");
  expect_refused(uri("idem", "sslmode=disable&" + password()), "no encryption");
  expect_refused(uri("idem", verify(files_->ca) + "&password=wrong-pw"), "password authentication failed");
  // libpq's default, sslmode=prefer: encrypted (the server takes nothing else), and a
  // certificate from a CA this client was never given accepted.
  expect_open(uri("idem", password()));
}

TEST_F(PostgresTls, AClientCertificateUserNeedsItsCertificate) {
  ASSERT_NE(server_, nullptr);
  const std::string cert = "&sslcert=" + files_->client_cert;
  expect_open(uri("idem-client", verify(files_->ca) + cert + "&sslkey=" + files_->client_key));
  expect_open(uri("idem-client", verify(files_->ca) + cert + "&sslkey=" + files_->client_key_encrypted +
                                     "&sslpassword_file=" + dir_->sub("key-password")));
  expect_refused(uri("idem-client", verify(files_->ca)), "certificate");
}

}  // namespace
}  // namespace idem::postgres_test
