#include "support/slow_handler.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "support/temp_dir.hpp"

namespace idem::slow_handler {
namespace {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

Outcome run(consume_kills::Broker& broker, const std::string& topic, std::chrono::milliseconds lease) {
  Outcome out;
  testing::TempDir dir("slow-handler");
  const std::string sleep = std::to_string(3 * lease.count());
  {
    std::ofstream f(dir.sub("in.jsonl"));
    f << R"({"id":"s-1","sleep_ms":)" << sleep << "}\n" << R"({"id":"s-2","sleep_ms":)" << sleep << "}\n";
  }
  const int published = wait_exit(
      spawn_idem({"publish", "--to", broker.publish_uri(topic), dir.sub("in.jsonl")}, dir.sub("publish.log")),
      std::chrono::seconds(60));
  EXPECT_EQ(published, 0) << read_text(dir.sub("publish.log"));
  const std::string handler = "exec:python3 " IDEM_SIDECAR_EXAMPLES "/exec_handler.py " + dir.sub("calls.log");
  auto start = [&](const std::string& log) {
    return spawn_idem({"consume", "--source", broker.source_uri(topic, "g"), "--store",
                       "sqlite:" + dir.sub("db") + "?leases=shared", "--handler", handler, "--workers", "1",
                       "--lease-ms", std::to_string(lease.count()), "--handler-timeout-ms",
                       std::to_string(10 * lease.count()), "--idle-exit-ms", "2500"},
                      log);
  };
  const pid_t a = start(dir.sub("a.log"));
  // b starts once a runs the first message's handler (its call in the log): checked,
  // not slept on. With one worker, a then holds the second in its backlog.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_text(dir.sub("calls.log")).empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(read_text(dir.sub("calls.log")).empty()) << "a never called the handler; " << read_text(dir.sub("a.log"));
  const pid_t b = start(dir.sub("b.log"));
  const int a_rc = wait_exit(a, std::chrono::seconds(120)), b_rc = wait_exit(b, std::chrono::seconds(120));
  out.logs = read_text(dir.sub("a.log")) + "--- b\n" + read_text(dir.sub("b.log"));
  EXPECT_EQ(a_rc, 0) << out.logs;
  EXPECT_EQ(b_rc, 0) << out.logs;
  std::ifstream calls(dir.sub("calls.log"));
  std::string id;
  int attempt = 0;
  while (calls >> id >> attempt) out.calls[id].push_back(attempt);
  out.in_progress = count(out.logs, R"("reason":"in_progress")");
  return out;
}

}  // namespace idem::slow_handler
