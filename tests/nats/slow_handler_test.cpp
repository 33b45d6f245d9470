// A handler three times slower than AckWait, which is the lease, behind `idem consume`
// with two consumers of one durable (examples/sidecar's exec: handler, which sleeps
// as the body says). The source's keep_alive() sends +WPI for each running delivery,
// so JetStream never hands it to the other consumer: each message is called once, and
// no copy meets the store's lease (in_progress). Label scenarios (end to end).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/nats_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::nats_test {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using namespace std::chrono_literals;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// handler id → the attempts it was called with ("ID ATTEMPT" lines of the handler's log).
std::map<std::string, std::vector<int>> calls(const std::string& log) {
  std::map<std::string, std::vector<int>> out;
  std::ifstream f(log);
  std::string id;
  int attempt = 0;
  while (f >> id >> attempt) out[id].push_back(attempt);
  return out;
}

TEST(NatsSlowHandler, AHandlerThreeTimesSlowerThanAckWaitRunsOnceAcrossTwoConsumers) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("nats-slow");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    f << R"({"id":"s-1","sleep_ms":3000})" << '\n' << R"({"id":"s-2","sleep_ms":3000})" << '\n';
  }
  const std::string uri = (*server)->uri() + "?stream=slow";
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", uri, dir.sub("in.jsonl")}, dir.sub("publish.log")), 30s), 0)
      << read_text(dir.sub("publish.log"));
  const std::string handler = "exec:python3 " IDEM_SIDECAR_EXAMPLES "/exec_handler.py " + dir.sub("calls.log");
  auto start = [&](const std::string& out) {
    return spawn_idem({"consume", "--source", uri + "&durable=g", "--store", "sqlite:" + dir.sub("db") + "?leases=shared",
                       "--handler", handler, "--workers", "1", "--lease-ms", "1000", "--handler-timeout-ms", "10000",
                       "--idle-exit-ms", "2500"},
                      out);
  };
  const pid_t a = start(dir.sub("a.log"));
  std::this_thread::sleep_for(500ms);  // a has fetched both
  const pid_t b = start(dir.sub("b.log"));
  EXPECT_EQ(wait_exit(a, 60s), 0) << read_text(dir.sub("a.log"));
  EXPECT_EQ(wait_exit(b, 60s), 0) << read_text(dir.sub("b.log"));
  const auto c = calls(dir.sub("calls.log"));
  EXPECT_EQ(c.count("s-1") ? c.at("s-1") : std::vector<int>{}, std::vector<int>{1});
  EXPECT_EQ(c.count("s-2") ? c.at("s-2") : std::vector<int>{}, std::vector<int>{1});
  const std::string logs = read_text(dir.sub("a.log")) + "--- b\n" + read_text(dir.sub("b.log"));
  EXPECT_EQ(logs.find("in_progress"), std::string::npos) << logs;
}

}  // namespace
}  // namespace idem::nats_test
