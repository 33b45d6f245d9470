// `idem bench [--store URI] [--messages N] [--batch N] [--duplicates F]`: runs, on the
// user's machine and store, the raw primitive, the naive approach and idem (per
// message and in batches) over one stream of deliveries, prints a table and one
// machine-readable BENCH line per row, and checks that every row found exactly the
// stream's duplicates (docs/design.md §8; figures in docs/performance.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_rows.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/consumer.hpp"
#include "idem/open_store.hpp"

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "Rows: raw (the store's primitive per id), raw_batch (the same, --batch ids at a time), naive (check,\n"
    "handle, insert), single (idem's Consumer::process), batch (Consumer::process_batch). Every row gets\n"
    "the same stream with ids of its own (idem-bench-<nonce>-<row>-...), so an existing store sees only new\n"
    "ids; idem rows leave records that expire after an hour. p50_us / p99_us: the latency of one call\n"
    "(a message, or a batch for the _batch rows and batch). One thread, no-op handler, effectively_once.\n"
    "Exit status: 0 every row found exactly the stream's duplicates; 1 a row miscounted or the store\n"
    "failed; 2 invalid options or store URI.";

constexpr std::size_t kMemoryMessages = 1'000'000;  // default --messages on memory:
constexpr std::size_t kDurableMessages = 100'000;   // default --messages elsewhere
constexpr auto kBenchTtl = std::chrono::hours(1);   // ttl of the idem rows' records

struct BenchArgs {
  std::string store = "memory:";
  std::size_t messages = 0;  // 0: by scheme
  std::size_t batch = 1000;
  double duplicates = 0.10;
};

struct RowReport {
  std::string path;
  double msgs_per_s = 0;
  double p50_us = 0, p99_us = 0;
  BenchCounts counts;
};

// The q-quantile of `ns` (reordered), in µs.
double quantile_us(std::vector<std::int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
  return static_cast<double>(ns[k]) / 1000.0;
}

// Runs one row over `ms`, timing each step call.
RowReport measure(const BenchRow& row, const std::vector<Msg>& ms) {
  using Clock = std::chrono::steady_clock;
  RowReport r{row.path, 0, 0, 0, {}};
  std::vector<std::int64_t> ns;
  ns.reserve(ms.size() / row.chunk + 1);
  const std::span<const Msg> all(ms);
  const Clock::time_point start = Clock::now();
  for (std::size_t i = 0; i < all.size(); i += row.chunk) {
    const std::size_t n = std::min(row.chunk, all.size() - i);
    const Msg* next = i + n < all.size() ? &all[i + n] : nullptr;
    const Clock::time_point t0 = Clock::now();
    row.step(all.subspan(i, n), next, r.counts);
    ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.msgs_per_s = seconds > 0 ? static_cast<double>(ms.size()) / seconds : 0;
  r.p50_us = quantile_us(ns, 0.50);
  r.p99_us = quantile_us(ns, 0.99);
  return r;
}

void count(const Decision& d, BenchCounts& c) {
  if (d.action == Action::kAck && d.reason == Reason::kProcessed)
    ++c.processed;
  else if (d.action == Action::kAck && d.reason == Reason::kDuplicate)
    ++c.duplicates;
  else
    ++c.other;
}

// single and batch: a Consumer over a store opened from the URI.
BenchRow idem_row(const std::string& path, const std::string& uri, std::size_t chunk) {
  ConsumerOptions o;
  o.guarantee = Guarantee::kEffectivelyOnce;
  o.ttl = kBenchTtl;
  auto store = open_store(uri);
  if (!store.ok()) throw std::runtime_error("cannot open " + uri + ": " + store.status().to_string());
  o.store = std::move(store).value();
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto made = Consumer<Msg>::create(std::move(o), std::move(ex),
                                    [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  if (!made.ok()) throw std::runtime_error("Consumer::create: " + made.status().to_string());
  auto consumer = std::make_shared<Consumer<Msg>>(std::move(made).value());
  BenchRow row{path, chunk, nullptr, consumer};
  if (chunk == 1) {
    // process(m, next): on a store with combined_commit_claim (Redis) m's commit and
    // next's claim share a round trip; elsewhere it is process(m).
    row.step = [c = consumer.get()](std::span<const Msg> ms, const Msg* next, BenchCounts& n) {
      count(next != nullptr ? c->process(ms[0], *next) : c->process(ms[0]), n);
    };
  } else {
    row.step = [c = consumer.get()](std::span<const Msg> ms, const Msg*, BenchCounts& n) {
      for (const Decision& d : c->process_batch(ms)) count(d, n);
    };
  }
  return row;
}

std::string random_nonce() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

class BenchRun {
 public:
  explicit BenchRun(const BenchArgs& a) : a_(a) {}

  int run() {
    auto uri = StoreUri::parse(a_.store);
    if (!uri.ok()) return usage(uri.status().to_string());
    scheme_ = uri->scheme;
    if (a_.batch == 0) return usage("--batch must be > 0");
    if (a_.duplicates < 0 || a_.duplicates >= 1) return usage("--duplicates must be in [0, 1)");
    bench::StreamOptions so;
    so.messages = a_.messages != 0 ? a_.messages : scheme_ == "memory" ? kMemoryMessages : kDurableMessages;
    so.duplicate_share = a_.duplicates;
    stream_ = bench::make_stream(so);
    setup_ = {a_.store, a_.batch, random_nonce()};
    try {
      run_rows();
    } catch (const std::exception& e) {
      std::cerr << "idem bench: " << e.what() << '\n';
      return kExitFailure;
    }
    print_table();
    print_lines();
    return check() ? kExitOk : kExitFailure;
  }

 private:
  static int usage(const std::string& why) {
    std::cerr << "idem bench: " << why << '\n';
    return kExitUsage;
  }

  std::vector<RowFactory> factories() const {
    std::vector<RowFactory> rows;
    if (scheme_ == "memory") rows = memory_rows(setup_);
#ifdef IDEM_TOOL_WITH_SQLITE
    if (scheme_ == "sqlite") rows = sqlite_rows(setup_);
#endif
#ifdef IDEM_TOOL_WITH_ROCKSDB
    if (scheme_ == "rocksdb") rows = rocksdb_rows(setup_);
#endif
#ifdef IDEM_TOOL_WITH_REDIS
    if (scheme_ == "redis") rows = redis_rows(setup_);
#endif
    const std::string uri = a_.store;
    const std::size_t batch = a_.batch;
    rows.push_back([uri] { return idem_row("single", uri, 1); });
    rows.push_back([uri, batch] { return idem_row("batch", uri, batch); });
    return rows;
  }

  // The stream with ids of row `row`'s own.
  std::vector<Msg> stream_for(std::size_t row) const {
    const std::string prefix = "idem-bench-" + setup_.nonce + "-" + std::to_string(row) + "-";
    std::vector<Msg> ms;
    ms.reserve(stream_.messages.size());
    for (const Msg& m : stream_.messages) ms.push_back({prefix + m.id});
    return ms;
  }

  void run_rows() {
    const std::vector<RowFactory> rows = factories();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::vector<Msg> ms = stream_for(i);
      const BenchRow row = rows[i]();
      reports_.push_back(measure(row, ms));
    }
  }

  void print_table() const {
    std::printf("idem bench: store=%s, %zu deliveries (%zu distinct ids, %zu re-sent), batch %zu, 1 thread\n\n",
                scheme_.c_str(), stream_.messages.size(), stream_.unique, stream_.duplicates, a_.batch);
    std::printf("%-12s %14s %10s %10s %10s %10s %6s\n", "path", "msgs/s", "p50_us", "p99_us", "processed", "duplicates",
                "other");
    for (const RowReport& r : reports_)
      std::printf("%-12s %14.0f %10.2f %10.2f %10llu %10llu %6llu\n", r.path.c_str(), r.msgs_per_s, r.p50_us, r.p99_us,
                  static_cast<unsigned long long>(r.counts.processed),
                  static_cast<unsigned long long>(r.counts.duplicates),
                  static_cast<unsigned long long>(r.counts.other));
    std::printf("\n");
  }

  void print_lines() const {
    for (const RowReport& r : reports_)
      std::printf("BENCH store=%s path=%s threads=1 msgs_per_s=%.0f p50_us=%.2f p99_us=%.2f\n", scheme_.c_str(),
                  r.path.c_str(), r.msgs_per_s, r.p50_us, r.p99_us);
    std::fflush(stdout);
  }

  // True iff every row found exactly the stream's duplicates.
  bool check() const {
    bool all = true;
    for (const RowReport& r : reports_) {
      if (r.counts.processed == stream_.unique && r.counts.duplicates == stream_.duplicates && r.counts.other == 0)
        continue;
      std::cerr << "idem bench: row " << r.path << " found " << r.counts.processed << " new, " << r.counts.duplicates
                << " duplicates, " << r.counts.other << " other; expected " << stream_.unique << " new and "
                << stream_.duplicates << " duplicates\n";
      all = false;
    }
    return all;
  }

  BenchArgs a_;
  std::string scheme_;
  bench::Stream stream_;
  BenchSetup setup_;
  std::vector<RowReport> reports_;
};

}  // namespace

void add_bench_command(CLI::App& app, Runner& selected) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure idem against the raw store and the naive approach");
  cmd->footer(kFooter);
  cmd->add_option("--store", args->store, "store URI (default memory:)");
  cmd->add_option("--messages", args->messages,
                  "deliveries in the stream (default 1000000 on memory:, 100000 elsewhere)");
  cmd->add_option("--batch", args->batch, "ids per batch in the batch rows (default 1000)");
  cmd->add_option("--duplicates", args->duplicates, "share of deliveries that re-send an earlier id (default 0.1)");
  cmd->callback([args, &selected] { selected = [args] { return BenchRun(*args).run(); }; });
}

}  // namespace idem::cli
