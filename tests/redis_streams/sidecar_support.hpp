// What the `idem consume --handler` tests share: a Redis, one of the handlers of
// examples/sidecar (Python's http.server, Node's node:http, a Python exec: handler),
// and idem consume run against them.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/child_process.hpp"
#include "support/consume_kills.hpp"
#include "support/idem_state.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::sidecar_test {

using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using redis_test::RedisServer;
using namespace std::chrono_literals;

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// handler id → the attempts it was called with, from the example handlers' log.
inline std::map<std::string, std::vector<int>> calls(const std::string& log) {
  std::map<std::string, std::vector<int>> out;
  std::ifstream f(log);
  std::string id;
  int attempt = 0;
  while (f >> id >> attempt) out[id].push_back(attempt);
  return out;
}

// One of the example handlers, started for a test.
struct Kind {
  const char* name;
  bool http;
};
inline void PrintTo(const Kind& k, std::ostream* os) { *os << k.name; }

class Handler {
 public:
  Handler(const Kind& kind, const std::string& dir) : kind_(kind), dir_(dir), log_(dir + "/calls.log") {
    if (!kind.http) {
      spec_ = "exec:python3 " + std::string(IDEM_SIDECAR_EXAMPLES) + "/exec_handler.py " + log_;
      return;
    }
    serve("0");
  }
  ~Handler() { stop(); }

  // An HTTP service: stops it (SIGTERM), or starts it again on the same port.
  void stop() {
    test_support::reap(pid_, SIGTERM);
    pid_ = -1;
  }
  void start_again() { serve(port_); }

  const std::string& spec() const { return spec_; }
  const std::string& log() const { return log_; }

 private:
  // Starts the service on `port` ("0": any free one); spec_ stays empty if it did not
  // say its port.
  void serve(const std::string& port) {
    const std::string out = dir_ + "/handler.out";
    std::remove(out.c_str());
    const std::string script =
        std::string(IDEM_SIDECAR_EXAMPLES) + (std::string(kind_.name) == "node" ? "/handler.js" : "/handler.py");
    pid_ = test_support::spawn({std::string(kind_.name) == "node" ? "node" : "python3", script, log_, port}, out);
    spec_.clear();
    for (int i = 0; i < 200 && spec_.empty(); ++i) {
      const std::string text = read_text(out);
      if (const auto at = text.find("PORT="); at != std::string::npos && text.find('\n', at) != std::string::npos) {
        port_ = text.substr(at + 5, text.find('\n', at) - at - 5);
        spec_ = "http://127.0.0.1:" + port_ + "/orders";
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  const Kind kind_;
  const std::string dir_, log_;
  std::string spec_, port_;
  pid_t pid_ = -1;
};

// A Redis and one handler per test.
class SidecarBase : public ::testing::Test {
 protected:
  void start(const Kind& kind) {
    auto s = RedisServer::start({});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
    handler_ = std::make_unique<Handler>(kind, dir_.str());
    ASSERT_FALSE(handler_->spec().empty()) << "the handler did not start: " << read_text(dir_.sub("handler.out"));
  }

  std::string stream() const { return "redis-stream://127.0.0.1:" + std::to_string(server_->port()) + "/orders"; }

  void publish(const std::vector<std::string>& lines) {
    {
      std::ofstream f(dir_.sub("in.jsonl"));
      for (const std::string& l : lines) f << l << '\n';
    }
    ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", stream(), dir_.sub("in.jsonl")}, dir_.sub("publish.log")), 30s),
              0);
  }

  // Runs idem consume with the handler until idle; returns its output. `more` are
  // flag-value pairs that replace the defaults of the same flags or add to them.
  std::string consume(const std::vector<std::string>& more = {}) {
    std::vector<std::pair<std::string, std::string>> flags{
        {"--source", stream() + "?group=g"}, {"--store", "sqlite:" + dir_.sub("db")}, {"--handler", handler_->spec()},
        {"--backoff-ms", "100"}, {"--idle-exit-ms", "2500"}, {"--workers", "2"},
        // A copy that meets its original in flight (in_progress) comes back after the lease;
        // a call may take longer (a loaded machine starting Python), which extends it.
        {"--lease-ms", "3000"}, {"--handler-timeout-ms", "10000"}};
    for (std::size_t i = 0; i + 1 < more.size(); i += 2) {
      auto it = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == more[i]; });
      if (it == flags.end()) it = flags.insert(flags.end(), {more[i], ""});
      it->second = more[i + 1];
    }
    std::vector<std::string> args{"consume"};
    for (const auto& [flag, value] : flags) args.insert(args.end(), {flag, value});
    const std::string out = dir_.sub("consume.log");
    std::remove(out.c_str());
    EXPECT_EQ(wait_exit(spawn_idem(args, out), 60s), 0) << read_text(out);
    return read_text(out);
  }

  testing::TempDir dir_{"sidecar"};
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Handler> handler_;
};

class Sidecar : public SidecarBase, public ::testing::WithParamInterface<Kind> {
 protected:
  void SetUp() override { start(GetParam()); }
};

// The HTTP services only (Python's, Node's).
class HttpSidecar : public SidecarBase, public ::testing::WithParamInterface<Kind> {
 protected:
  void SetUp() override { start(GetParam()); }
};

class ExecSidecar : public SidecarBase {
 protected:
  void SetUp() override { start({"exec", false}); }
};

class PythonSidecar : public SidecarBase {
 protected:
  void SetUp() override { start({"python", true}); }
};

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace idem::sidecar_test
