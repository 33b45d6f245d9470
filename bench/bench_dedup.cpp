// idem_bench_dedup: the foundation's performance benchmark.
//
// One run, one deterministic id stream (1M deliveries, 10% re-sent later, ids like
// `orders-7-000001234` in shuffled order), each path on a fresh temporary database:
// idem over the memory store, idem over idem::sqlite (per message, in batches, with
// shared leases), beside the raw SQLite primitives and the naive per-message approach
// on the same ids. Prints msgs/s and the ratios the targets are stated in. With
// --repeat N the rows run N rounds, interleaved, and each keeps its fastest run.
//
// Exit status: 0 when every path counted exactly the stream's duplicates (and, with
// --strict, every target passed); 1 when a path miscounted; 3 (--strict) when a target
// failed; 2 when the run could not go on (e.g. a database could not be opened).
#include <sqlite3.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "id_stream.hpp"
#include "idem_paths.hpp"
#include "path_result.hpp"
#include "raw_memory.hpp"
#include "raw_sqlite.hpp"
#include "sqlite_probe.hpp"

namespace idem::bench {
namespace {

// One row of the table.
struct Row {
  std::string key;    // short name, as in --only
  std::string label;  // what was measured
  PathResult result;
};

// A ratio reported in the table: rate(row) / rate(baseline), with a target or none.
struct Comparison {
  std::string row, baseline, baseline_label;
  double min_ratio = 0;           // 0: reported only
  bool strictly_greater = false;  // the target is "> min_ratio" rather than ">="
};

// The performance targets, and the ratios reported for information.
const std::vector<Comparison> kComparisons = {
    {"idem", "raw", "raw autocommit", 0.5, false},
    {"idem", "naive", "naive", 0, false},
    {"idem_shared", "raw", "raw autocommit", 0, false},
    {"idem_batch", "raw_batch", "raw batched", 0.5, false},
    {"idem_batch", "naive", "naive", 1.0, true},
    {"memory_batch", "memory", "memory process", 1.0, true},
    {"memory", "hash_set", "raw hash set", 1.0, true},
    {"raw_layout", "raw", "raw autocommit", 0, false},
    {"raw_batch_layout", "raw_batch", "raw batched", 0, false},
    {"raw_batch_layout_noindex", "raw_batch", "raw batched", 0, false},
    {"raw_batch_layout_sorted", "raw_batch", "raw batched", 0, false},
    {"raw_batch_layout_ckpt", "raw_batch", "raw batched", 0, false},
    {"idem", "raw_layout", "raw idem layout", 0, false},
    {"idem_batch", "raw_batch_layout", "raw batched idem layout", 0, false},
    {"memory_store", "hash_set", "raw hash set", 0, false},
};
constexpr double kMemoryMinRate = 3'000'000;  // msgs/s, the memory path's absolute target
constexpr double kMaxAddedP99Us = 5.0;        // µs, the middleware's own p99 per message (memory_overhead)

void print_machine(const std::string& dir, std::size_t messages, std::size_t batch) {
  std::printf("idem_bench_dedup — machine facts that matter:\n");
  std::printf("  vCPUs: %u (%s), shared with other work and noisy: compare the RATIOS, not absolute rates\n",
              std::thread::hardware_concurrency(), first_line_of("/proc/cpuinfo", "model name").c_str());
  std::printf("  load average at start: %s\n", first_line_of("/proc/loadavg", "").c_str());
  std::printf("  SQLite %s; databases in %s (fresh file per path; WAL, synchronous=NORMAL, 64 MiB cache)\n",
              sqlite3_libversion(), dir.c_str());
#ifdef NDEBUG
  std::printf("  build: optimised (NDEBUG)\n");
#else
  std::printf("  build: NOT optimised or assertions on: configure with -DCMAKE_BUILD_TYPE=Release\n");
#endif
  std::printf("  single thread; no-op handler; effectively_once; system clock; %zu deliveries, batch %zu\n\n", messages,
              batch);
}

RawOptions layout_options(RawOptions o, bool with_expires_index) {
  o.table = idem_layout_table(with_expires_index);
  return o;
}

const Row* find_row(const std::vector<Row>& rows, const std::string& key) {
  for (const Row& r : rows)
    if (r.key == key) return &r;
  return nullptr;
}

// Prints the table and the per-path correctness; returns the exit status.
bool counted_exactly(const PathResult& x, const Stream& stream) {
  return x.processed == stream.unique && x.duplicates == stream.duplicates && x.other == 0;
}

// With --repeat: true iff `next` replaces `kept` as its row's run: a miscounted run is
// kept whatever its speed (the table must show it), else the faster one.
bool keeps(const PathResult& kept, const PathResult& next, const Stream& stream) {
  if (!counted_exactly(kept, stream)) return false;
  return !counted_exactly(next, stream) || next.rate() > kept.rate();
}

int print_table(const std::vector<Row>& rows, const Stream& stream, bool profile, bool strict) {
  bool miscounted = false, failed = false;
  std::printf("%-40s %12s %7s %7s %12s %9s  %-28s %-9s %s\n", "path", "msgs/s", "wall s", "cpu s", "msgs/cpu-s", "dups",
              "ratio", "target", "result");
  std::printf("%s\n", std::string(139, '-').c_str());
  for (const Row& r : rows) {
    const PathResult& x = r.result;
    const bool counted = counted_exactly(x, stream);
    miscounted = miscounted || !counted;
    char dups[32];
    std::snprintf(dups, sizeof dups, "%llu%s", static_cast<unsigned long long>(x.duplicates), counted ? "" : "!");
    std::vector<std::string> tails;
    if (r.key == "memory") {
      const bool ok = x.rate() >= kMemoryMinRate;
      failed = failed || !ok;
      char t[160];
      std::snprintf(t, sizeof t, "%-28s %-9s %s", "(absolute)", ">= 3.0M/s", ok ? "PASS" : "FAIL");
      tails.emplace_back(t);
    }
    for (const Comparison& c : kComparisons) {
      if (c.row != r.key) continue;
      const Row* base = find_row(rows, c.baseline);
      if (base == nullptr || base->result.rate() <= 0) continue;
      const double ratio = x.rate() / base->result.rate();
      char what[64], target[32] = "", t[160];
      std::snprintf(what, sizeof what, "%.2fx %s", ratio, c.baseline_label.c_str());
      const char* verdict = "";
      if (c.min_ratio > 0) {
        const bool ok = c.strictly_greater ? ratio > c.min_ratio : ratio >= c.min_ratio;
        failed = failed || !ok;
        std::snprintf(target, sizeof target, "%s %.2fx", c.strictly_greater ? ">" : ">=", c.min_ratio);
        verdict = ok ? "PASS" : "FAIL";
      }
      std::snprintf(t, sizeof t, "%-28s %-9s %s", what, target, verdict);
      tails.emplace_back(t);
    }
    if (x.added_p99_us) {
      const bool ok = *x.added_p99_us <= kMaxAddedP99Us;
      failed = failed || !ok;
      char what[64], t[160];
      std::snprintf(what, sizeof what, "added p50 %.2f p99 %.2f us", *x.added_p50_us, *x.added_p99_us);
      std::snprintf(t, sizeof t, "%-28s %-9s %s", what, "p99 <= 5", ok ? "PASS" : "FAIL");
      tails.emplace_back(t);
    }
    if (tails.empty()) tails.emplace_back("(baseline)");
    const double cpu_rate = x.cpu_seconds > 0 ? static_cast<double>(x.messages) / x.cpu_seconds : 0;
    std::printf("%-40s %12s %7.2f %7.2f %12s %9s  %s\n", r.label.c_str(), with_commas(x.rate()).c_str(), x.wall_seconds,
                x.cpu_seconds, with_commas(cpu_rate).c_str(), dups, tails[0].c_str());
    for (std::size_t i = 1; i < tails.size(); ++i) std::printf("%-93s  %s\n", "", tails[i].c_str());
  }
  std::printf("%s\n", std::string(139, '-').c_str());
  std::printf(
      "msgs/s uses wall time (the targets); msgs/cpu-s uses this process's CPU time, steadier when the\n"
      "machine is busy but blind to I/O waits (fsync), so it flatters the SQLite rows.\n");
  std::printf("dups: duplicates each path detected; expected exactly %zu (and %zu processed, nothing else)%s\n",
              stream.duplicates, stream.unique, miscounted ? "; '!' marks a path that MISCOUNTED\n" : ", all exact\n");
  std::fflush(stdout);
  if (profile) {
    std::printf("\n");
    for (const Row& r : rows)
      if (r.result.probe && !r.result.probe->statements.empty())
        print_probe(r.label, *r.result.probe, r.result.messages);
  }
  for (const Row& r : rows) {
    const PathResult& x = r.result;
    if (x.processed != stream.unique || x.duplicates != stream.duplicates || x.other != 0)
      std::fprintf(stderr, "idem_bench_dedup: %s: processed %llu (want %zu), duplicates %llu (want %zu), other %llu\n",
                   r.label.c_str(), static_cast<unsigned long long>(x.processed), stream.unique,
                   static_cast<unsigned long long>(x.duplicates), stream.duplicates,
                   static_cast<unsigned long long>(x.other));
  }
  if (miscounted) return 1;
  return strict && failed ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"idem dedup benchmark: idem vs raw SQLite vs the naive approach, on the same ids"};
  StreamOptions so;
  std::size_t batch = 1000;
  bool quick = false, strict = false, profile = false, layouts = false;
  int repeat = 1;
  std::string dir = "/tmp";
  std::vector<std::string> only;
  app.add_option("-n,--messages", so.messages, "deliveries in the stream (default 1000000)");
  app.add_flag("--quick", quick, "smoke run: 100000 deliveries");
  app.add_option("-b,--batch", batch, "messages per transaction / process_batch call (default 1000)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--duplicates", so.duplicate_share, "share of re-sent deliveries (default 0.10)")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--seed", so.seed, "stream seed (default 20261129)");
  app.add_option("--dir", dir, "directory for the temporary databases (default /tmp)");
  app.add_option("--only", only,
                 "run only these rows: hash_set, memory_store, memory, memory_batch, memory_overhead, raw, idem, "
                 "idem_shared, raw_batch, "
                 "idem_batch, naive; with --layouts: raw_layout, raw_batch_layout, raw_batch_layout_noindex, "
                 "raw_batch_layout_sorted, raw_batch_layout_ckpt")
      ->delimiter(',');
  app.add_flag("--profile", profile,
               "also trace every SQLite connection: statements per message, time per statement, "
               "WAL frames per commit, syncs (slows SQLite paths)");
  app.add_flag("--layouts", layouts,
               "also insert raw into a copy of idem::sqlite's layout: as is, without its expiry index, "
               "each batch sorted, with wal_autocheckpoint=10000");
  app.add_option("--repeat", repeat,
                 "run every wanted row this many times, rows interleaved round by round, and keep each "
                 "row's fastest run (a run that miscounted is kept instead) (default 1)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--strict", strict, "exit 3 if a performance target fails");
  CLI11_PARSE(app, argc, argv);
  if (quick) so.messages = 100'000;
  if (so.messages == 0) {
    std::fprintf(stderr, "idem_bench_dedup: --messages must be > 0\n");
    return 2;
  }

  char tmpl_buf[4096];
  std::snprintf(tmpl_buf, sizeof tmpl_buf, "%s/idem-bench-XXXXXX", dir.c_str());
  if (mkdtemp(tmpl_buf) == nullptr) {
    std::perror("idem_bench_dedup: mkdtemp");
    return 2;
  }
  const std::string tmp = tmpl_buf;
  const std::string db = tmp + "/bench.db";

  print_machine(tmp, so.messages, batch);
  const Stream stream = make_stream(so);
  std::printf("stream: %zu deliveries = %zu distinct ids + %zu re-sends, e.g. %s\n\n", stream.messages.size(),
              stream.unique, stream.duplicates, stream.messages.front().id.c_str());

  if (profile) install_probe();
  RawOptions ro;
  ro.batch = batch;
  const Feed one{false, batch};
  const Feed many{true, batch};
  const std::string b = std::to_string(batch);

  // Rows in run order: each idem row right after the baseline it is compared with.
  struct Plan {
    std::string key, label;
    std::function<PathResult()> run;
  };
  std::vector<Plan> plan = {
      {"hash_set", "raw     unordered_set<string>::insert", [&] { return run_raw_hash_set(stream); }},
      {"memory_store", "store   memory claim+commit, no engine", [&] { return run_memory_store_direct(stream); }},
      {"memory", "memory  Consumer::process", [&] { return run_memory(stream, one); }},
      {"memory_batch", "memory  Consumer::process_batch(" + b + ")", [&] { return run_memory(stream, many); }},
      {"memory_overhead", "memory  process, timed (added latency)", [&] { return run_memory_overhead(stream); }},
      {"raw", "raw     autocommit INSERT OR IGNORE", [&] { return run_raw_autocommit(db, stream, ro); }},
#ifdef IDEM_BENCH_WITH_SQLITE_STORE
      {"idem", "idem    sqlite process (kLocal)", [&] { return run_idem_sqlite(db, stream, one, false); }},
      {"idem_shared", "idem    sqlite process (kShared)", [&] { return run_idem_sqlite(db, stream, one, true); }},
#endif
      {"raw_layout", "raw     autocommit, idem layout",
       [&] { return run_raw_autocommit(db, stream, layout_options(ro, true)); }},
      {"raw_batch", "raw     INSERT OR IGNORE, " + b + "/txn", [&] { return run_raw_batched(db, stream, ro); }},
#ifdef IDEM_BENCH_WITH_SQLITE_STORE
      {"raw_batch_layout", "raw     " + b + "/txn, idem layout",
       [&] { return run_raw_batched(db, stream, layout_options(ro, true)); }},
      {"raw_batch_layout_noindex", "raw     " + b + "/txn, idem layout - index",
       [&] { return run_raw_batched(db, stream, layout_options(ro, false)); }},
      {"raw_batch_layout_sorted", "raw     " + b + "/txn, idem layout, sorted",
       [&] {
         RawOptions o = layout_options(ro, true);
         o.sort_batch = true;
         return run_raw_batched(db, stream, o);
       }},
      {"raw_batch_layout_ckpt", "raw     " + b + "/txn, idem layout, ckpt 10k",
       [&] {
         RawOptions o = layout_options(ro, true);
         o.wal_autocheckpoint = 10'000;
         return run_raw_batched(db, stream, o);
       }},
      {"idem_batch", "idem    sqlite process_batch(" + b + ")",
       [&] { return run_idem_sqlite(db, stream, many, false); }},
#endif
      {"naive", "naive   SELECT, handler, INSERT", [&] { return run_naive(db, stream, ro); }},
  };

  std::vector<const Plan*> wanted;
  for (const Plan& p : plan) {
    const bool layout_row = p.key.find("layout") != std::string::npos;
    if (only.empty() ? layout_row && !layouts : std::find(only.begin(), only.end(), p.key) == only.end()) continue;
    wanted.push_back(&p);
  }
  std::vector<Row> rows;
  for (int round = 0; round < repeat; ++round) {
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      std::fprintf(stderr, "running %-42s ...", wanted[i]->label.c_str());
      Row row{wanted[i]->key, wanted[i]->label, wanted[i]->run()};
      std::fprintf(stderr, " %12s msgs/s\n", with_commas(row.result.rate()).c_str());
      if (round == 0) {
        rows.push_back(std::move(row));
      } else if (keeps(rows[i].result, row.result, stream)) {
        rows[i] = std::move(row);
      }
    }
  }
  ::rmdir(tmp.c_str());
  return print_table(rows, stream, profile, strict);
}
}  // namespace idem::bench

int main(int argc, char** argv) { return idem::bench::main(argc, argv); }
