// `idem publish` and `idem consume` over TLS end to end: the stream on
// rediss-stream://, the records in a rediss:// store, both on a redis-server that
// requires a client certificate and a password; a CA that did not sign the server's
// certificate, and a source without a client certificate, are refused at once in one
// line without the secret.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::redis_streams_tls_test {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using redis_test::RedisServer;
using test_support::TlsFiles;

constexpr char kPassword[] = "tls-hunter2";

struct Outcome {
  int rc = -1;
  std::string text;  // stdout and stderr
};

class RedisStreamsTls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    files_ = test_support::make_tls_files(dir_.sub("tls"), &error);
    ASSERT_TRUE(files_.has_value()) << error;
    std::ofstream(dir_.sub("password")) << kPassword << '\n';
    redis_test::ServerConfig c;
    c.password = kPassword;
    c.tls_cert = files_->server_cert;
    c.tls_key = files_->server_key;
    c.tls_ca = files_->ca;
    c.tls_auth_clients = true;
    c.tls_client_cert = files_->client_cert;
    c.tls_client_key = files_->client_key;
    auto s = RedisServer::start(std::move(c));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }

  // "SCHEME://127.0.0.1:PORT" + path + "?password_file=…&tls_ca=CA" + client
  // certificate (unless without_cert) + more.
  std::string uri(const std::string& scheme, const std::string& path, const std::string& ca, bool with_cert,
                  const std::string& more = "") const {
    std::string u = scheme + "://127.0.0.1:" + std::to_string(server_->port()) + path +
                    "?password_file=" + dir_.sub("password") + "&tls_ca=" + ca;
    if (with_cert) u += "&tls_cert=" + files_->client_cert + "&tls_key=" + files_->client_key;
    return u + more;
  }
  Outcome idem(const std::vector<std::string>& args) {
    const std::string log = dir_.sub("run.log");
    std::remove(log.c_str());
    Outcome r;
    r.rc = wait_exit(spawn_idem(args, log), std::chrono::seconds(30));
    std::ifstream f(log);
    r.text.assign(std::istreambuf_iterator<char>(f), {});
    return r;
  }
  Outcome consume(const std::string& source, const std::string& store) {
    return idem({"consume", "--source", source, "--store", store, "--idle-exit-ms", "1000", "--source-wait-ms", "0"});
  }
  void expect_refused(const Outcome& r, const std::string& cause) {
    EXPECT_EQ(r.rc, 1) << r.text;
    EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n'), 1) << r.text;
    EXPECT_NE(r.text.find(cause), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find(kPassword), std::string::npos) << r.text;
  }

  testing::TempDir dir_{"redis-streams-tls"};
  std::optional<TlsFiles> files_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisStreamsTls, PublishAndConsumeOverVerifiedTlsIntoATlsStore) {
  std::ofstream(dir_.sub("in.jsonl")) << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
  const Outcome sent =
      idem({"publish", "--to", uri("rediss-stream", "/orders", files_->ca, true), dir_.sub("in.jsonl")});
  ASSERT_EQ(sent.rc, 0) << sent.text;
  const std::string store = uri("rediss", "", files_->ca, true);
  const Outcome got = consume(uri("rediss-stream", "/orders", files_->ca, true, "&group=g"), store);
  ASSERT_EQ(got.rc, 0) << got.text;
  for (const char* id : {"a", "b", "c"})
    EXPECT_NE(got.text.find(std::string(R"("id":")") + id + R"(","action":"ack","reason":"processed")"),
              std::string::npos)
        << id << "\n" << got.text;
  auto pending = server_->command({"XPENDING", "orders", "g"});
  ASSERT_TRUE(pending.ok()) << pending.status().to_string();
  ASSERT_FALSE(pending->elements.empty());
  EXPECT_EQ(pending->elements[0].integer, 0) << "every entry acked over TLS";
  auto keys = server_->command({"KEYS", "idem:*"});
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->elements.size(), 3u) << "one record per id in the TLS store";

  const Outcome again = consume(uri("rediss-stream", "/orders", files_->ca, true, "&group=g2"), store);
  ASSERT_EQ(again.rc, 0) << again.text;
  EXPECT_EQ(std::count(again.text.begin(), again.text.end(), '\n'), 3) << again.text;
  EXPECT_EQ(again.text.find("\"processed\""), std::string::npos) << "a second group's copies are duplicates\n"
                                                                 << again.text;
}

TEST_F(RedisStreamsTls, AWrongCaOrAMissingClientCertificateIsRefusedAtOnce) {
  const std::string store = uri("rediss", "", files_->ca, true);
  expect_refused(consume(uri("rediss-stream", "/orders", files_->other_ca, true, "&group=g"), store),
                 "the server's certificate is not accepted");
  expect_refused(consume(uri("rediss-stream", "/orders", files_->ca, false, "&group=g"), store),
                 "it asks for a client certificate");
  expect_refused(consume(uri("rediss-stream", "/orders", files_->ca, true, "&group=g"),
                         uri("rediss", "", files_->other_ca, true)),
                 "the server's certificate is not accepted");
}

}  // namespace
}  // namespace idem::redis_streams_tls_test
