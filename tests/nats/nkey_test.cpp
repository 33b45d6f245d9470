// `idem publish` and `idem consume` against a nats-server whose one user is known by
// its NKey (made by support/nkeys.hpp): the public key and the seed's file in the URI
// work; another key's seed, a seed for the listed key under another name, and no
// credentials are refused at once in one line that never holds the seed. And against
// a server in operator mode, with a credentials file (the user's JWT and seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/nats_server.hpp"
#include "support/nkeys.hpp"
#include "support/temp_dir.hpp"

namespace idem::nats_nkey_test {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using nats_test::NatsServer;
using nats_test::UserNKey;

struct Outcome {
  int rc = -1;
  std::string text;  // stdout and stderr
};

// Runs `idem args…` with its output to `log` (replaced), up to 30 s.
Outcome run_idem(const std::vector<std::string>& args, const std::string& log) {
  std::remove(log.c_str());
  Outcome r;
  r.rc = wait_exit(spawn_idem(args, log), std::chrono::seconds(30));
  std::ifstream f(log);
  r.text.assign(std::istreambuf_iterator<char>(f), {});
  return r;
}

class NatsNKey : public ::testing::Test {
 protected:
  void SetUp() override {
    auto user = nats_test::make_user_nkey();
    auto other = nats_test::make_user_nkey();
    ASSERT_TRUE(user.ok() && other.ok());
    user_ = *user;
    other_ = *other;
    ASSERT_EQ(user_.public_key.size(), 56u);
    ASSERT_EQ(user_.public_key[0], 'U');
    ASSERT_EQ(user_.seed.substr(0, 2), "SU");
    std::ofstream(dir_.sub("seed")) << user_.seed << '\n';
    std::ofstream(dir_.sub("other-seed")) << other_.seed << '\n';
    auto s = NatsServer::start({.nkey = user_.public_key, .nkey_seed_file = dir_.sub("seed")});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }

  std::string uri(const std::string& params) const {
    return "nats://127.0.0.1:" + std::to_string(server_->port()) + "?stream=s" + params;
  }
  Outcome idem(const std::vector<std::string>& args) { return run_idem(args, dir_.sub("run.log")); }
  Outcome consume(const std::string& params) {
    return idem({"consume", "--source", uri("&durable=g" + params), "--store", "sqlite:" + dir_.sub("db"),
                 "--idle-exit-ms", "1000", "--source-wait-ms", "0"});
  }
  void expect_refused(const Outcome& r, const std::string& why) {
    EXPECT_EQ(r.rc, 1) << why << ": " << r.text;
    EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n'), 1) << why << ": " << r.text;
    for (const std::string& seed : {user_.seed, other_.seed})
      EXPECT_EQ(r.text.find(seed), std::string::npos) << why << ": " << r.text;
  }

  testing::TempDir dir_{"nats-nkey"};
  UserNKey user_, other_;
  std::unique_ptr<NatsServer> server_;
};

TEST_F(NatsNKey, TheListedKeyWorksAndEveryOtherIsRefused) {
  const std::string mine = "&nkey=" + user_.public_key + "&nkey_seed_file=" + dir_.sub("seed");
  std::ofstream(dir_.sub("in.jsonl")) << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
  const Outcome sent = idem({"publish", "--to", uri(mine), dir_.sub("in.jsonl")});
  ASSERT_EQ(sent.rc, 0) << sent.text;
  const Outcome got = consume(mine);
  ASSERT_EQ(got.rc, 0) << got.text;
  for (const char* id : {"a", "b", "c"})
    EXPECT_NE(got.text.find(std::string(R"("id":")") + id + R"(","action":"ack","reason":"processed")"),
              std::string::npos)
        << got.text;
  expect_refused(consume("&nkey=" + other_.public_key + "&nkey_seed_file=" + dir_.sub("other-seed")),
                 "a key the server does not list");
  expect_refused(consume("&nkey=" + user_.public_key + "&nkey_seed_file=" + dir_.sub("other-seed")),
                 "the listed key signed with another seed");
  expect_refused(consume(""), "no credentials");
}

// Operator mode, as NGS and Synadia Cloud run: the account's JWT signed by the
// operator, the user's by the account; idem connects with the user's `.creds` file.
TEST(NatsCreds, ACredentialsFileWorksAndAnotherOperatorsIsRefused) {
  testing::TempDir dir("nats-creds");
  auto setup = nats_test::make_operator_setup();
  auto other = nats_test::make_operator_setup();
  ASSERT_TRUE(setup.ok() && other.ok());
  std::ofstream(dir.sub("user.creds")) << setup->user_creds;
  std::ofstream(dir.sub("other.creds")) << other->user_creds;
  auto s = NatsServer::start({.operator_jwt = setup->operator_jwt,
                              .system_public_key = setup->system_public_key,
                              .system_jwt = setup->system_jwt,
                              .account_public_key = setup->account_public_key,
                              .account_jwt = setup->account_jwt,
                              .creds_file = dir.sub("user.creds")});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string base = "nats://127.0.0.1:" + std::to_string((*s)->port()) + "?stream=s&creds=";
  std::ofstream(dir.sub("in.jsonl")) << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n";
  const auto run = [&](const std::vector<std::string>& args) { return run_idem(args, dir.sub("run.log")); };
  const auto sent = run({"publish", "--to", base + dir.sub("user.creds"), dir.sub("in.jsonl")});
  ASSERT_EQ(sent.rc, 0) << sent.text;
  const auto got = run({"consume", "--source", base + dir.sub("user.creds") + "&durable=g", "--store",
                        "sqlite:" + dir.sub("db"), "--idle-exit-ms", "1000", "--source-wait-ms", "0"});
  ASSERT_EQ(got.rc, 0) << got.text;
  for (const char* id : {"a", "b"})
    EXPECT_NE(got.text.find(std::string(R"("id":")") + id + R"(","action":"ack","reason":"processed")"),
              std::string::npos)
        << got.text;
  const auto refused = run({"consume", "--source", base + dir.sub("other.creds") + "&durable=g", "--store",
                            "sqlite:" + dir.sub("db"), "--idle-exit-ms", "1000", "--source-wait-ms", "0"});
  EXPECT_EQ(refused.rc, 1) << "another operator's user: " << refused.text;
  EXPECT_EQ(std::count(refused.text.begin(), refused.text.end(), '\n'), 1) << refused.text;
  const std::string& creds = other->user_creds;
  const std::size_t seed_at = creds.find("SEED-----\n") + 10;
  const std::string seed = creds.substr(seed_at, creds.find('\n', seed_at) - seed_at);
  ASSERT_EQ(seed.substr(0, 2), "SU");
  EXPECT_EQ(refused.text.find(seed), std::string::npos) << "no seed in the message: " << refused.text;
}

}  // namespace
}  // namespace idem::nats_nkey_test
