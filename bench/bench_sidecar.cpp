// `idem consume --handler http://…` against the plain loop it replaces, on Redis
// Streams, in one run. Every row's messages go to the same no-op HTTP handler (in
// this process, cpp-httplib), one keep-alive connection per worker:
//   plain          W threads, each a consumer of the group: XREADGROUP COUNT 64,
//                  a POST per message, one XACK per batch; nothing durable
//   idem_sqlite    idem consume --handler … --workers W --batch B on sqlite:
//                  (effectively_once: each worker claims B messages in one store call,
//                  POSTs them one by one, and commits them in one transaction)
//   idem_memory    the same on memory: — idem's engine and runtime without a durable
//                  store, the floor of the sidecar path
// Each row is timed from its start to the handler's N-th request (so idem's process
// start counts against it), median of --repeat runs; ratios against plain.
#include <hiredict/hiredict.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::size_t messages = 20'000;
  int workers = 4;
  int batch = 16;  // idem's --batch: messages claimed and committed together per worker
  int repeat = 3;
};

// The no-op handler: counts requests, and notes when the n-th came.
class Handler {
 public:
  Handler() {
    server_.set_tcp_nodelay(true);
    server_.Post("/h", [this](const httplib::Request&, httplib::Response& res) {
      if (++count_ == target_) done_at_ = Clock::now();
      res.set_content("ok", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Handler() {
    server_.stop();
    thread_.join();
  }
  void expect(std::size_t n) {
    count_ = 0;
    target_ = n;
  }
  // Seconds from t0 to the n-th request (waits for it, up to two minutes).
  double seconds_since(Clock::time_point t0) {
    const auto deadline = Clock::now() + std::chrono::minutes(2);
    while (count_ < target_ && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(200));
    return std::chrono::duration<double>(done_at_ - t0).count();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<std::size_t> count_{0}, target_{0};
  Clock::time_point done_at_;
};

void publish(int port, const std::string& stream, std::size_t n) {
  redictContext* c = redictConnect("127.0.0.1", port);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string body = R"({"id":"m-)" + std::to_string(i) + R"("})";
    redictAppendCommand(c, "XADD %s * body %s", stream.c_str(), body.c_str());
  }
  for (std::size_t i = 0; i < n; ++i) {
    void* r = nullptr;
    redictGetReply(c, &r);
    freeReplyObject(r);
  }
  redictFree(c);
}

// One consumer of the plain loop: read 64, POST each, XACK them, until the stream is dry.
void plain_worker(int redis_port, int http_port, const std::string& stream, int id) {
  redictContext* c = redictConnect("127.0.0.1", redis_port);
  httplib::Client h("127.0.0.1", http_port);
  h.set_keep_alive(true);
  h.set_tcp_nodelay(true);
  const std::string name = "c" + std::to_string(id);
  for (;;) {
    auto* r = static_cast<redictReply*>(redictCommand(c, "XREADGROUP GROUP g %s COUNT 64 BLOCK 500 STREAMS %s >",
                                                    name.c_str(), stream.c_str()));
    if (r == nullptr || r->type != REDICT_REPLY_ARRAY) {
      freeReplyObject(r);
      break;
    }
    const redictReply* entries = r->element[0]->element[1];
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < entries->elements; ++i) {
      const redictReply* e = entries->element[i];
      h.Post("/h", std::string(e->element[1]->element[1]->str, e->element[1]->element[1]->len), "application/json");
      ids.emplace_back(e->element[0]->str, e->element[0]->len);
    }
    std::vector<const char*> argv{"XACK", stream.c_str(), "g"};
    for (const std::string& i : ids) argv.push_back(i.c_str());
    freeReplyObject(redictCommandArgv(c, static_cast<int>(argv.size()), argv.data(), nullptr));
    freeReplyObject(r);
  }
  redictFree(c);
}

double plain(const Config& cfg, int redis_port, Handler& h, const std::string& stream) {
  redictContext* c = redictConnect("127.0.0.1", redis_port);
  freeReplyObject(redictCommand(c, "XGROUP CREATE %s g 0 MKSTREAM", stream.c_str()));
  redictFree(c);
  h.expect(cfg.messages);
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int w = 0; w < cfg.workers; ++w) ts.emplace_back(plain_worker, redis_port, h.port(), stream, w);
  const double s = h.seconds_since(t0);
  for (auto& t : ts) t.join();
  return s;
}

double idem_consume(const Config& cfg, int redis_port, Handler& h, const std::string& stream, const std::string& store) {
  h.expect(cfg.messages);
  const std::string source = "redis-stream://127.0.0.1:" + std::to_string(redis_port) + "/" + stream + "?group=g";
  const std::string handler = "http://127.0.0.1:" + std::to_string(h.port()) + "/h";
  const std::string workers = std::to_string(cfg.workers), batch = std::to_string(cfg.batch);
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    execl(IDEM_BINARY, "idem", "consume", "--source", source.c_str(), "--store", store.c_str(), "--handler",
          handler.c_str(), "--workers", workers.c_str(), "--batch", batch.c_str(), "--idle-exit-ms", "500", "--quiet",
          nullptr);
    _exit(127);
  }
  const double s = h.seconds_since(t0);
  waitpid(pid, nullptr, 0);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app("idem consume --handler http:// against the plain loop, on Redis Streams");
  app.add_option("--messages", cfg.messages, "messages per row and run")->capture_default_str();
  app.add_option("--workers", cfg.workers, "worker threads of every row")->capture_default_str();
  app.add_option("--batch", cfg.batch, "idem's --batch")->capture_default_str();
  app.add_option("--repeat", cfg.repeat, "runs per row; the median is reported")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto redis = idem::redis_test::RedisServer::start({});
  if (!redis.ok()) return std::fprintf(stderr, "redis: %s\n", redis.status().to_string().c_str()), 1;
  const int port = (*redis)->port();
  Handler handler;
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-sidecar-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<double> p, s, m;
  for (int r = 0; r < cfg.repeat; ++r) {
    const std::string tag = std::to_string(r);
    for (const char* row : {"plain", "sqlite", "memory"}) publish(port, row + tag, cfg.messages);
    p.push_back(plain(cfg, port, handler, "plain" + tag));
    s.push_back(idem_consume(cfg, port, handler, "sqlite" + tag, "sqlite:" + (dir / ("db" + tag)).string()));
    m.push_back(idem_consume(cfg, port, handler, "memory" + tag, "memory:"));
  }
  std::filesystem::remove_all(dir);
  const double plain_rate = cfg.messages / median(p), sqlite_rate = cfg.messages / median(s),
               memory_rate = cfg.messages / median(m);
  std::printf("idem consume --handler http:// vs the plain loop, Redis Streams, %zu messages, %d workers, idem --batch %d, "
              "median of %d\n\n",
              cfg.messages, cfg.workers, cfg.batch, cfg.repeat);
  std::printf("%-14s %10s\n", "path", "msg/s");
  std::printf("%-14s %10.0f\n%-14s %10.0f\n%-14s %10.0f\n\n", "plain", plain_rate, "idem_sqlite", sqlite_rate,
              "idem_memory", memory_rate);
  std::printf("idem_sqlite / plain   %.2f  (target >= 0.70)\n", sqlite_rate / plain_rate);
  std::printf("idem_memory / plain   %.2f  (the engine and runtime alone)\n", memory_rate / plain_rate);
  for (const auto& [path, rate] : {std::pair{"plain", plain_rate}, {"idem_sqlite", sqlite_rate}, {"idem_memory", memory_rate}})
    std::printf("BENCH broker=redis-stream path=%s workers=%d handler=http msgs_per_s=%.0f\n", path, cfg.workers, rate);
  return 0;
}
