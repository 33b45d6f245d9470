// idem_bench_outbox: what the transactional outbox costs, in one run, on SQLite.
//
// The same transactional consumer (idem::sqlite, one file per row, a handler that
// inserts one row into its own table through idem::sqlite::connection) runs the same
// unique ids twice: without the outbox (`txn`), and publishing one message per
// incoming one through the outbox (`txn_outbox`: the outbox row in the commit, the
// publish after it and the "sent" update — dispatch included). The publisher is an
// in-process sink that copies each message (a broker client with no network), so
// the ratio is idem's own cost. Per message (Consumer::process, one transaction
// each) and in batches (process_batch, one transaction per batch). Target:
// txn_outbox / txn <= 1.5 in both (docs/performance.md). Each row also prints the
// ratio of this process's CPU time (the lowest of the rounds on each side: steadier
// than the elapsed time on a busy machine, but blind to I/O waits) and the
// pages SQLite wrote to the WAL per message on each side (SQLITE_DBSTATUS_CACHE_WRITE
// of the store's connection), the cost the ratio follows. --only runs one side and
// --row one row, for a profiler (e.g. strace -c -e fdatasync,pwrite64).
//
// Exit status: 0; 3 with --strict when a target failed; 2 when the run cannot go on.
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "idem/consumer.hpp"
#include "idem/sqlite_store.hpp"

namespace idem::bench {
namespace {

struct Msg {
  std::string id;
};

// A broker client with no network: keeps the bytes it was given.
class SinkPublisher final : public Publisher {
 public:
  Status publish(std::span<const OutgoingMessage> messages) override {
    for (const auto& m : messages) bytes_ += m.id.size() + m.body.size();
    return ok_status();
  }

 private:
  std::size_t bytes_ = 0;
};

// The handler: one row into the user's table, and (outbox) one outgoing message.
class Handler {
 public:
  explicit Handler(bool publish) : publish_(publish) {}
  ~Handler() { sqlite3_finalize(insert_); }

  HandlerResult operator()(const Msg& m, HandlerContext& ctx) {
    sqlite3* db = sqlite::connection(ctx);
    int current = 0, highest = 0;
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_WRITE, &current, &highest, 0);
    if (calls_++ == 0) first_pages_ = current;
    last_pages_ = current;
    if (insert_ == nullptr && sqlite3_prepare_v3(db, "INSERT INTO effects(id, at) VALUES(?1, ?2)", -1,
                                                 SQLITE_PREPARE_PERSISTENT, &insert_, nullptr) != SQLITE_OK)
      return HandlerResult::fail(sqlite3_errmsg(db));
    sqlite3_bind_text(insert_, 1, m.id.data(), static_cast<int>(m.id.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert_, 2, 1);
    const int rc = sqlite3_step(insert_);
    sqlite3_reset(insert_);
    if (rc != SQLITE_DONE) return HandlerResult::fail(sqlite3_errmsg(db));
    if (publish_) {
      if (Status s = ctx.publish("sink://orders", "{\"order\":\"" + m.id + "\"}"); !s.ok())
        return HandlerResult::fail(s.to_string());
    }
    return HandlerResult::ok();
  }

  // Pages the store's connection wrote between the handler's first and latest runs.
  int pages_written() const { return last_pages_ - first_pages_; }

 private:
  const bool publish_;
  std::size_t calls_ = 0;
  int first_pages_ = 0, last_pages_ = 0;
  sqlite3_stmt* insert_ = nullptr;
};

struct RunResult {
  double seconds = 0;
  double cpu_seconds = 0;        // this process's CPU time over the same span
  double pages_per_message = 0;  // written to the WAL, over the run's transactions
};

// Runs `ids` through a fresh store at `path`; 0 batch: process() each.
RunResult run(const std::string& path, const std::vector<Msg>& ids, bool outbox, std::size_t batch) {
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE effects(id TEXT, at INTEGER)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  ConsumerOptions o;
  o.store = sqlite::open({.path = path}).value();
  o.transactional = true;
  o.latency_metrics = false;
  if (outbox)
    o.outbox.publishers = [](const std::string&) {
      return StatusOr<std::unique_ptr<Publisher>>(std::make_unique<SinkPublisher>());
    };
  auto handler = std::make_shared<Handler>(outbox);
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto c = Consumer<Msg>::create(o, x, [handler](const Msg& m, HandlerContext& ctx) { return (*handler)(m, ctx); });
  if (!c.ok()) {
    std::fprintf(stderr, "idem_bench_outbox: %s\n", c.status().to_string().c_str());
    std::exit(2);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_now();
  std::size_t ok = 0;
  if (batch == 0) {
    for (const Msg& m : ids) ok += c->process(m).reason == Reason::kProcessed ? 1 : 0;
  } else {
    for (std::size_t i = 0; i < ids.size(); i += batch) {
      const std::size_t n = std::min(batch, ids.size() - i);
      for (const Decision& d : c->process_batch(std::span<const Msg>(ids.data() + i, n)))
        ok += d.reason == Reason::kProcessed ? 1 : 0;
    }
  }
  c->tick();  // idle: marks the last messages sent
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = cpu_now() - cpu0;
  // One more message, untimed: its handler reads the pages written by every earlier
  // transaction (the tick's included).
  (void)c->process(Msg{"probe"});
  c->tick();
  r.pages_per_message = static_cast<double>(handler->pages_written()) / static_cast<double>(ids.size());
  if (ok != ids.size()) {
    std::fprintf(stderr, "idem_bench_outbox: %zu of %zu processed\n", ok, ids.size());
    std::exit(2);
  }
  if (outbox) {
    OutboxQuery q;
    if (!o.store->outbox()->outbox_pending(q).value().empty()) {
      std::fprintf(stderr, "idem_bench_outbox: outgoing messages left unsent\n");
      std::exit(2);
    }
  }
  return r;
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) {
  using namespace idem::bench;
  CLI::App app("idem_bench_outbox: the transactional outbox's cost on SQLite (docs/performance.md)");
  std::size_t n = 20'000, batch = 64;
  int rounds = 3;
  bool strict = false;
  std::string dir = std::filesystem::temp_directory_path().string();
  app.add_option("--messages", n, "Unique ids per row")->capture_default_str();
  app.add_option("--batch", batch, "Messages per process_batch in the batch rows")->capture_default_str();
  app.add_option("--rounds", rounds, "Runs of each row; the fastest counts")->capture_default_str();
  app.add_option("--dir", dir, "Where the SQLite files go")->capture_default_str();
  app.add_flag("--strict", strict, "Exit 3 when a ratio misses its target");
  std::string only;
  app.add_option("--only", only, "Run one side only (no ratio), e.g. under a profiler")
      ->check(CLI::IsMember({"txn", "outbox"}));
  std::string row_only;
  app.add_option("--row", row_only, "Run one row only")->check(CLI::IsMember({"per_message", "batch"}));
  CLI11_PARSE(app, argc, argv);
  std::vector<Msg> ids;
  for (std::size_t i = 0; i < n; ++i) ids.push_back({"order-" + std::to_string(i * 7919 % n)});
  const std::string path = dir + "/idem_bench_outbox-" + std::to_string(::getpid()) + ".db";
  std::printf("idem_bench_outbox: %zu messages, batch %zu, best of %d; cpu: %s\n", n, batch, rounds,
              first_line_of("/proc/cpuinfo", "model name").c_str());
  std::printf("%-12s %12s %12s %8s %10s %14s\n", "row", "txn msg/s", "outbox msg/s", "ratio", "cpu ratio", "pages/msg");
  bool met = true;
  for (const std::size_t b : {std::size_t{0}, batch}) {
    if (!row_only.empty() && row_only != (b == 0 ? "per_message" : "batch")) continue;
    RunResult plain{1e300, 1e300, 0}, with{1e300, 1e300, 0};
    const auto keep_best = [](RunResult& best, const RunResult& x) {
      best.cpu_seconds = std::min(best.cpu_seconds, x.cpu_seconds);
      if (x.seconds < best.seconds) best = RunResult{x.seconds, best.cpu_seconds, x.pages_per_message};
    };
    for (int r = 0; r < rounds; ++r) {  // alternated, so drift hits both alike
      if (only != "outbox") keep_best(plain, run(path, ids, false, b));
      if (only != "txn") keep_best(with, run(path, ids, true, b));
    }
    const char* row = b == 0 ? "per_message" : "batch";
    const auto rate = [&](const RunResult& x) { return x.seconds < 1e300 ? with_commas(n / x.seconds) : "-"; };
    char pages[64];
    std::snprintf(pages, sizeof pages, "%.2f / %.2f", plain.pages_per_message, with.pages_per_message);
    if (!only.empty()) {
      std::printf("%-12s %12s %12s %8s %10s %14s\n", row, rate(plain).c_str(), rate(with).c_str(), "-", "-", pages);
      continue;
    }
    const double ratio = with.seconds / plain.seconds;
    met = met && ratio <= 1.5;
    std::printf("%-12s %12s %12s %8.2f %10.2f %14s  (target <= 1.5%s)\n", row, rate(plain).c_str(), rate(with).c_str(),
                ratio, with.cpu_seconds / plain.cpu_seconds, pages, ratio <= 1.5 ? "" : ", MISSED");
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return strict && !met ? 3 : 0;
}
