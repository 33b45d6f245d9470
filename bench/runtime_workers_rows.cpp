// The workers curve of idem_bench_runtime (see bench_runtime.cpp): a handler that
// sleeps 1 ms, as one waiting on I/O does, over Redis Streams with the Redis store
// (whose handlers run outside any store lock), W workers; then two consumers of one
// group against one; then the same handler on SQLite in transactional mode, whose
// write lock is held while the handler runs.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "idem/redis_store.hpp"
#include "idem/redis_stream_source.hpp"
#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"
#include "support/redis_server.hpp"

namespace idem::bench {
namespace {

constexpr std::chrono::milliseconds kHandlerTime{1};
constexpr std::size_t kPerWorker = 1000;       // messages per worker and row: about a second
constexpr std::size_t kSqliteMessages = 1000;  // per SQLite row: about a second, whatever W

struct CurveSetup {
  int port = 0;
  std::string sqlite_dir;
};

std::shared_ptr<Store> redis_store(int port, const std::string& prefix) {
  redis::Options o;
  o.endpoints = {{"127.0.0.1", static_cast<std::uint16_t>(port)}};
  o.prefix = prefix;
  return redis::open(o).value();
}

std::unique_ptr<MessageSource> stream_source(int port, const std::string& stream) {
  redis_streams::Options o;
  o.port = static_cast<std::uint16_t>(port);
  o.stream = stream;
  o.group = "g";
  return redis_streams::open(o).value();
}

bool publish(int port, const std::string& stream, std::size_t n) {
  redis_streams::Options o;
  o.port = static_cast<std::uint16_t>(port);
  o.stream = stream;
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = stream + "-" + std::to_string(i)});
  auto p = redis_streams::open_publisher(o);
  return p.ok() && (*p)->publish(bodies).ok();
}

// `consumers` consumers of one group, each with `workers` workers, over a stream of
// consumers × `per` messages, run at once. Returns the group's msgs/s.
double curve_point(const CurveSetup& s, const std::string& name, std::size_t consumers, std::size_t workers,
                   std::size_t per, bool sqlite) {
  const std::size_t n = consumers * per;
  if (!publish(s.port, name, n)) return 0;
  std::atomic<std::size_t> calls{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (std::size_t k = 0; k < consumers; ++k) {
    threads.emplace_back([&, k] {
      auto src = stream_source(s.port, name);
      std::shared_ptr<Store> store;
      if (sqlite) {
        sqlite::Options so;
        so.path = s.sqlite_dir + "/" + name + ".db";
        store = sqlite::open(so).value();
      } else {
        store = redis_store(s.port, name + ":" + std::to_string(k) + ":");
      }
      (void)sleeping_rate(*src, store, sqlite, workers, per, &calls);
    });
  }
  for (auto& t : threads) t.join();
  const double r = rate(n, Clock::now() - t0);
  if (calls.load() != n) std::fprintf(stderr, "%s: the handler ran %zu times for %zu messages\n", name.c_str(),
                                      calls.load(), n);
  return r;
}

}  // namespace

double sleeping_rate(MessageSource& source, std::shared_ptr<Store> store, bool transactional, std::size_t workers,
                     std::size_t n, std::atomic<std::size_t>* calls) {
  ConsumerOptions o;
  o.store = std::move(store);
  o.transactional = transactional;
  o.latency_metrics = false;
  auto c = Consumer<Msg>::create(o, extractors(), [calls](const Msg&, HandlerContext&) {
    std::this_thread::sleep_for(kHandlerTime);
    if (calls != nullptr) calls->fetch_add(1, std::memory_order_relaxed);
    return HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = workers;
  ro.max_messages = n;
  auto rt = Runtime<Msg>::create(ro, source, *c, decode).value();
  const auto t0 = Clock::now();
  (void)rt->run();
  const double r = rate(n, Clock::now() - t0);
  source.close();
  return r;
}

bool workers_rows(std::vector<Row>& rows) {
  auto server = redis_test::RedisServer::start({});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start redis-server: %s\n", server.status().to_string().c_str());
    return false;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-curve-" + std::to_string((*server)->port()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const CurveSetup s{(*server)->port(), dir.string()};
  for (std::size_t w : {1, 2, 4, 8, 16}) {
    const std::string name = "sleep1ms_w" + std::to_string(w);
    rows.push_back({name, "Redis Streams, Redis store, handler sleeps 1 ms, " + std::to_string(w) + " workers",
                    curve_point(s, name, 1, w, w * kPerWorker, false)});
  }
  rows.push_back({"sleep1ms_w8_x2", "two consumers of one group, 8 workers each", curve_point(s, "x2", 2, 8, 8 * kPerWorker, false)});
  for (std::size_t w : {1, 8}) {
    const std::string name = "sqlite_sleep1ms_w" + std::to_string(w);
    rows.push_back({name, "the same on SQLite, transactional: the write lock is held while the handler runs",
                    curve_point(s, name, 1, w, kSqliteMessages, true)});
  }
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace idem::bench
