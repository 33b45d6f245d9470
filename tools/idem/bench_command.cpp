// `idem bench [--store URI] [--messages N] [--batch N] [--duplicates F] [--repeat N]`
// (with --source URI [--workers N] [--handler-ms MS]: the broker rows of
// bench_source.cpp) runs, on the user's machine and store, the raw primitive, the naive approach and
// idem (per message and in batches) over one stream of deliveries, round by round
// (each row once per round, in turn, on ids of its own), prints a table and one
// machine-readable BENCH line per row (the median round), and checks that every row
// found exactly the stream's duplicates in every round (docs/design.md §8; figures in
// docs/performance.md).
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
#ifdef IDEM_TOOL_WITH_BROKERS
#include "bench_source.hpp"
#endif
#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/consumer.hpp"
#include "idem/open_store.hpp"

namespace idem::cli {

double quantile_us(std::vector<std::int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
  return static_cast<double>(ns[k]) / 1000.0;
}

std::string random_nonce() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

namespace {

constexpr const char* kFooter =
    "Rows: raw (the store's primitive per id), raw_batch (the same, --batch ids at a time), naive (check,\n"
    "handle, insert), single (idem's Consumer::process), batch (Consumer::process_batch). Every row gets\n"
    "the same stream with ids of its own (idem-bench-<nonce>-<row>-...), so an existing store sees only new\n"
    "ids; idem rows leave records that expire after an hour. p50_us / p99_us: the latency of one call\n"
    "(a message, or a batch for the _batch rows and batch). One thread, no-op handler, effectively_once.\n"
    "--repeat N runs the rows N times, interleaved round by round, and reports each row's median round,\n"
    "so that a noisy machine slows every row alike.\n"
    "With --source URI (a broker URI of `idem consume`): rows plain (the broker, at_least_once, no store),\n"
    "floor (the store over an in-memory source) and idem (both), each through the runtime with --workers\n"
    "and --batch and a handler sleeping --handler-ms, on destinations of their own (the URI's stream, queue\n"
    "or topic with a suffix), removed afterwards. Rates from the first receipt to the last decision;\n"
    "p50_us / p99_us: receipt to decision applied. Defaults there: 20000 messages, batch 100, 2 workers.\n"
    "Exit status: 0 every row found exactly the stream's duplicates (with --source: plain ran every\n"
    "delivery, floor and idem every distinct id once); 1 a row miscounted or the store or broker failed;\n"
    "2 invalid options or URI.";

constexpr std::size_t kMemoryMessages = 1'000'000;  // default --messages on memory:
constexpr std::size_t kDurableMessages = 100'000;   // default --messages elsewhere
constexpr auto kBenchTtl = std::chrono::hours(1);   // ttl of the idem rows' records

struct BenchArgs {
  std::string store = "memory:";
  std::size_t messages = 0;  // 0: by scheme, or 20,000 with --source
  std::size_t batch = 1000;  // 100 with --source when not given
  bool batch_given = false;
  double duplicates = 0.10;
  int repeat = 1;
  std::string source;        // empty: the store rows
  std::size_t workers = 2;   // with --source
  double handler_ms = 0;     // with --source
  bool broker_flags = false; // --workers or --handler-ms given
};

struct RowReport {
  std::string path;
  double msgs_per_s = 0;
  double p50_us = 0, p99_us = 0;
  BenchCounts counts;
};

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

class BenchRun {
 public:
  explicit BenchRun(const BenchArgs& a) : a_(a) {}

  int run() {
    auto uri = StoreUri::parse(a_.store);
    if (!uri.ok()) return usage(uri.status().to_string());
    scheme_ = uri->scheme;
    if (a_.batch == 0) return usage("--batch must be > 0");
    if (a_.duplicates < 0 || a_.duplicates >= 1) return usage("--duplicates must be in [0, 1)");
    if (a_.repeat < 1 || a_.repeat > 100) return usage("--repeat must be in [1, 100]");
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

  static int usage(const std::string& why) {
    std::cerr << "idem bench: " << why << '\n';
    return kExitUsage;
  }

 private:

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
    if (scheme_ == "redis" || scheme_ == "rediss") rows = redis_rows(setup_);
#endif
    const std::string uri = a_.store;
    const std::size_t batch = a_.batch;
    rows.push_back([uri] { return idem_row("single", uri, 1); });
    rows.push_back([uri, batch] { return idem_row("batch", uri, batch); });
    return rows;
  }

  // The stream with ids of row `row`'s own in round `round`.
  std::vector<Msg> stream_for(std::size_t row, int round) const {
    const std::string prefix =
        "idem-bench-" + setup_.nonce + "-" + std::to_string(row) + "-" + std::to_string(round) + "-";
    std::vector<Msg> ms;
    ms.reserve(stream_.messages.size());
    for (const Msg& m : stream_.messages) ms.push_back({prefix + m.id});
    return ms;
  }

  // Every row once per round, in turn; keeps each row's median round (by msgs/s).
  void run_rows() {
    const std::vector<RowFactory> rows = factories();
    std::vector<std::vector<RowReport>> rounds(rows.size());
    for (int r = 0; r < a_.repeat; ++r) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::vector<Msg> ms = stream_for(i, r);
        const BenchRow row = rows[i]();
        rounds[i].push_back(measure(row, ms));
      }
    }
    for (auto& of_row : rounds) {
      for (std::size_t r = 0; r < of_row.size(); ++r) {
        if (!counts_match(of_row[r])) miscounts_.push_back(miscount(of_row[r], r));
      }
      std::sort(of_row.begin(), of_row.end(),
                [](const RowReport& a, const RowReport& b) { return a.msgs_per_s < b.msgs_per_s; });
      reports_.push_back(of_row[of_row.size() / 2]);
    }
  }

  bool counts_match(const RowReport& r) const {
    return r.counts.processed == stream_.unique && r.counts.duplicates == stream_.duplicates && r.counts.other == 0;
  }

  std::string miscount(const RowReport& r, std::size_t round) const {
    std::string what = "row " + r.path;
    if (a_.repeat > 1) what += " (round " + std::to_string(round + 1) + ")";
    return what + " found " + std::to_string(r.counts.processed) + " new, " + std::to_string(r.counts.duplicates) +
           " duplicates, " + std::to_string(r.counts.other) + " other; expected " + std::to_string(stream_.unique) +
           " new and " + std::to_string(stream_.duplicates) + " duplicates";
  }

  void print_table() const {
    std::printf("idem bench: store=%s, %zu deliveries (%zu distinct ids, %zu re-sent), batch %zu, 1 thread",
                scheme_.c_str(), stream_.messages.size(), stream_.unique, stream_.duplicates, a_.batch);
    if (a_.repeat > 1) std::printf(", median of %d rounds", a_.repeat);
    std::printf("\n\n");
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

  // True iff every row found exactly the stream's duplicates in every round.
  bool check() const {
    for (const std::string& m : miscounts_) std::cerr << "idem bench: " << m << '\n';
    return miscounts_.empty();
  }

  BenchArgs a_;
  std::string scheme_;
  bench::Stream stream_;
  BenchSetup setup_;
  std::vector<RowReport> reports_;
  std::vector<std::string> miscounts_;  // the rounds that did not find exactly the duplicates
};

int run_bench(BenchArgs a) {
  if (a.source.empty()) {
    if (a.broker_flags) return BenchRun::usage("--workers and --handler-ms need --source");
    return BenchRun(a).run();
  }
#ifdef IDEM_TOOL_WITH_BROKERS
  SourceBenchArgs s{a.source, a.store, a.messages, a.workers, a.batch_given ? a.batch : 100, a.handler_ms,
                    a.duplicates, a.repeat};
  return run_source_bench(s);
#else
  return BenchRun::usage("--source: this idem was built without broker adapters");
#endif
}

}  // namespace

void add_bench_command(CLI::App& app, Runner& selected) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure idem against the raw store and the naive approach");
  cmd->footer(kFooter);
  cmd->add_option("--store", args->store, "store URI (default memory:)");
  cmd->add_option("--messages", args->messages,
                  "deliveries in the stream (default 1000000 on memory:, 100000 elsewhere)");
  cmd->add_option_function<std::size_t>(
      "--batch", [args](std::size_t n) { args->batch = n, args->batch_given = true; },
      "ids per batch in the batch rows (default 1000); with --source, RuntimeOptions::batch (default 100)");
  cmd->add_option("--duplicates", args->duplicates, "share of deliveries that re-send an earlier id (default 0.1)");
  cmd->add_option("--repeat", args->repeat, "rounds, rows interleaved; each row's median round is shown (default 1)");
  cmd->add_option("--source", args->source, "a broker URI: measure idem on that broker (see below)");
  cmd->add_option_function<std::size_t>(
      "--workers", [args](std::size_t n) { args->workers = n, args->broker_flags = true; },
      "with --source: runtime workers (default 2)");
  cmd->add_option_function<double>(
      "--handler-ms", [args](double ms) { args->handler_ms = ms, args->broker_flags = true; },
      "with --source: each handler call sleeps this long (default 0)");
  cmd->callback([args, &selected] { selected = [args] { return run_bench(*args); }; });
}

}  // namespace idem::cli
