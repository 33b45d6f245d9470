#include "support/bench_source_check.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "idem/open_source.hpp"
#include "support/temp_dir.hpp"

namespace idem::consume_kills {
namespace {

using namespace std::chrono_literals;

// The value of `name=` in `line`, as a number; -1 when absent.
double field(const std::string& line, const std::string& name) {
  const std::size_t at = line.find(" " + name + "=");
  return at == std::string::npos ? -1 : std::stod(line.substr(at + name.size() + 2));
}

void bench_rows_run(Broker& broker, const std::string& scheme) {
  testing::TempDir dir("bench");
  const std::string log = dir.sub("bench.log");
  const pid_t pid = spawn_idem({"bench", "--source", broker.source_uri("bench", "bench"), "--store",
                                "sqlite:" + dir.sub("bench.db"), "--messages", "2000", "--workers", "2"},
                               log);
  const int code = wait_exit(pid, 300s);
  std::ifstream in(log);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(code, 0) << out;
  std::vector<std::string> paths;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("BENCH broker=" + scheme + " ", 0) != 0) continue;
    paths.push_back(line.substr(line.find("path=") + 5, line.find(" workers=") - line.find("path=") - 5));
    EXPECT_GT(field(line, "msgs_per_s"), 0) << line;
    EXPECT_GT(field(line, "p99_us"), 0) << line;
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"plain", "floor", "idem"})) << out;
  EXPECT_NE(out.find("RATIO broker=" + scheme + " idem/plain="), std::string::npos) << out;
}

// Deliveries fetched from `uri` within `within`, acking none.
std::size_t fetched(const std::string& uri, std::chrono::milliseconds within) {
  auto s = open_source(uri);
  for (auto until = std::chrono::steady_clock::now() + 20s; !s.ok() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(500ms);  // Kafka: a topic being deleted cannot be made again yet
    s = open_source(uri);
  }
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return 0;
  std::vector<Delivery> out;
  for (auto until = std::chrono::steady_clock::now() + within; std::chrono::steady_clock::now() < until;)
    (void)(*s)->fetch(100, Duration(100), out);
  (*s)->close();
  return out.size();
}

void removal_deletes_messages(Broker& broker) {
  const std::string uri = broker.source_uri("removed", "g");
  ASSERT_EQ(fetched(uri, 300ms), 0u);  // the destination and the group exist, empty
  auto p = open_publisher(broker.publish_uri("removed"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> ms;
  for (int i = 0; i < 5; ++i) ms.push_back({"r" + std::to_string(i), "r" + std::to_string(i), {}, {}});
  ASSERT_TRUE((*p)->publish(ms).ok());
  ASSERT_TRUE(remove_destination(uri).ok());
  EXPECT_EQ(fetched(uri, 2000ms), 0u) << "messages published before remove_destination came back";
  EXPECT_TRUE(remove_destination(uri).ok());
  EXPECT_TRUE(remove_destination(uri).ok()) << "removing what is absent is no error";
}

}  // namespace

void run_bench_source_test(Broker& broker, const std::string& scheme) {
  bench_rows_run(broker, scheme);
  removal_deletes_messages(broker);
}

}  // namespace idem::consume_kills
