// idem_bench_ordering: what version ordering and a state machine cost over dedup alone
// (targets: in-order ≥ 0.8× dedup, 30% early ≥ 0.5× in-order, the machine ≥ 0.8× dedup on
// SQLite), on each store, in one run.
//
// The stream: K keys (default 64), versions 1..V each (N = K·V deliveries), distinct
// ids "k<key>-v<version>", keys interleaved round-robin. Rows per store (fresh store
// each; memory:, sqlite:, rocksdb: as built):
//   dedup    effectively_once, no ordering, the in-order stream        (the baseline)
//   inorder  ordering strict, the in-order stream                       target ≥ 0.80× dedup
//   early30  ordering strict; per key, within windows of 8 versions some versions are
//            moved earlier so that 30% of the deliveries arrive early (are buffered)
//                                                                       target ≥ 0.50× inorder
//   machine  a 2-state machine (off -turn_on-> on -turn_off-> off), events alternating
//            valid, no ordering, the in-order stream               target on sqlite: ≥ 0.80× dedup
// The same four rows again with the suffix _b use Consumer::process_batch of --batch
// deliveries (default 1000); the same targets hold between them (inorder_b / dedup_b …).
// On sqlite two more rows measure the floor of inorder / dedup with plain SQLite, no
// idem code, the same pragmas (WAL, synchronous=NORMAL, exclusive locking):
//   raw_dedup    per delivery: SELECT its id's row, then one transaction inserting it
//   raw_inorder  the same, plus a SELECT of the key's version and, in the same
//                transaction, an upsert of the key's row: the least a durable per-key
//                version costs per message (reported: raw_inorder / raw_dedup)
// Single thread, Consumer::process per delivery, system clock, default options. Each row
// runs --repeat times (rows interleaved) and the median rate is reported. The memory
// rows use a stream --memory-scale times longer (default 10), so that they run long
// enough to measure on a busy machine.
//
// Correctness is checked on every row: the handler sees each key's versions exactly
// once and in order (1, 2, …, V), every delivery is processed (or, early30, buffered
// and later drained: on_buffered reports it processed), nothing else happens.
//
// Exit status: 0 ok; 1 a row miscounted or the handler saw a version out of order or
// twice; 2 the run could not go on; 3 with --strict when a target failed.
#include <sqlite3.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#ifdef IDEM_BENCH_WITH_MACHINE
#include "idem/machine_dsl.hpp"
#include "idem/machine_gate.hpp"
#endif

namespace idem::bench {
namespace {

// ---- the messages ---------------------------------------------------------------------

struct BMsg {
  std::string id;
  std::string key;
  std::uint32_t key_index = 0;
  std::uint64_t version = 0;
  std::string_view event;  // "turn_on" for odd versions, "turn_off" for even ones
};

std::string_view event_for(std::uint64_t version) { return version % 2 == 1 ? "turn_on" : "turn_off"; }

BMsg make_msg(std::uint32_t k, std::uint64_t v) {
  BMsg m;
  m.key = "k" + std::to_string(k);
  m.id = m.key + "-v" + std::to_string(v);
  m.key_index = k;
  m.version = v;
  m.event = event_for(v);
  return m;
}

// "<key index> <version>": everything else follows from these.
std::string encode(const BMsg& m) { return std::to_string(m.key_index) + ' ' + std::to_string(m.version); }

std::optional<BMsg> decode(std::string_view s) {
  const auto space = s.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::uint32_t k = 0;
  std::uint64_t v = 0;
  if (std::from_chars(s.data(), s.data() + space, k).ec != std::errc()) return std::nullopt;
  if (std::from_chars(s.data() + space + 1, s.data() + s.size(), v).ec != std::errc()) return std::nullopt;
  return make_msg(k, v);
}

struct Streams {
  std::vector<BMsg> in_order;
  std::vector<BMsg> early;
  double early_share = 0;  // deliveries of `early` that arrive before a predecessor
  std::uint32_t keys = 0;
  std::uint64_t versions = 0;
};

// Deliveries of per-key version lists, keys round-robin.
std::vector<BMsg> interleave(const std::vector<std::vector<std::uint64_t>>& per_key) {
  std::vector<BMsg> out;
  const std::size_t len = per_key.empty() ? 0 : per_key.front().size();
  for (std::size_t i = 0; i < len; ++i)
    for (std::uint32_t k = 0; k < per_key.size(); ++k) out.push_back(make_msg(k, per_key[k][i]));
  return out;
}

// The share of a key's deliveries that arrive while a lower version is missing.
double early_share_of(const std::vector<std::vector<std::uint64_t>>& per_key) {
  std::size_t early = 0, total = 0;
  for (const auto& seq : per_key) {
    std::vector<bool> arrived(seq.size() + 2, false);
    std::uint64_t next = 1;
    for (std::uint64_t v : seq) {
      ++total;
      arrived[v] = true;
      if (v != next) {
        ++early;
        continue;
      }
      while (next < arrived.size() && arrived[next]) ++next;
    }
  }
  return total == 0 ? 0 : static_cast<double>(early) / static_cast<double>(total);
}

// Each key's versions in windows of `window`; each version after the first of its
// window moves, with probability q, to a random earlier place in the window.
std::vector<std::vector<std::uint64_t>> shuffled(std::uint32_t keys, std::uint64_t versions, std::size_t window,
                                                 double q, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<std::vector<std::uint64_t>> per_key(keys);
  for (auto& seq : per_key) {
    for (std::uint64_t v = 1; v <= versions; ++v) seq.push_back(v);
    for (std::size_t w = 0; w < seq.size(); w += window) {
      const std::size_t end = std::min(seq.size(), w + window);
      for (std::size_t i = w + 1; i < end; ++i) {
        if (coin(rng) >= q) continue;
        const std::size_t to = std::uniform_int_distribution<std::size_t>(w, i - 1)(rng);
        std::rotate(seq.begin() + static_cast<std::ptrdiff_t>(to), seq.begin() + static_cast<std::ptrdiff_t>(i),
                    seq.begin() + static_cast<std::ptrdiff_t>(i + 1));
      }
    }
  }
  return per_key;
}

Streams make_streams(std::size_t messages, std::uint32_t keys, std::size_t window, double target_early,
                     std::uint64_t seed) {
  Streams s;
  s.keys = keys;
  s.versions = std::max<std::uint64_t>(1, messages / keys);
  std::vector<std::vector<std::uint64_t>> ordered(keys);
  for (auto& seq : ordered)
    for (std::uint64_t v = 1; v <= s.versions; ++v) seq.push_back(v);
  s.in_order = interleave(ordered);
  // Bisect the move probability for the wanted early share (same seed every try).
  double lo = 0, hi = 1;
  for (int i = 0; i < 30; ++i) {
    const double mid = (lo + hi) / 2;
    (early_share_of(shuffled(keys, s.versions, window, mid, seed)) < target_early ? lo : hi) = mid;
  }
  const auto per_key = shuffled(keys, s.versions, window, hi, seed);
  s.early_share = early_share_of(per_key);
  s.early = interleave(per_key);
  return s;
}

// ---- one measured run -----------------------------------------------------------------

struct Result {
  double wall_seconds = 0, cpu_seconds = 0;
  std::uint64_t messages = 0;
  std::uint64_t processed = 0;          // ack/processed decisions
  std::uint64_t buffered = 0;           // ack|hold/buffered decisions
  std::uint64_t drained_processed = 0;  // on_buffered: processed
  std::uint64_t other = 0;              // any other decision or buffered outcome
  std::uint64_t order_errors = 0;       // handler calls that were not last + 1 of their key
  bool complete = false;                // every key ended at version V
  std::string error;                    // could not run

  double rate() const { return wall_seconds > 0 ? static_cast<double>(messages) / wall_seconds : 0; }
  bool exact() const {
    return error.empty() && complete && order_errors == 0 && other == 0 && processed + drained_processed == messages &&
           drained_processed == buffered;
  }
};

enum class Mode { kDedup, kStrict, kMachine, kRawDedup, kRawInorder };

#ifdef IDEM_BENCH_WITH_MACHINE
std::shared_ptr<const StateGate> two_state_machine() {
  using namespace idem::dsl;
  BuildResult b = Machine("switch")
                      .initial("off")
                      .rows({
                          state("off") + event("turn_on") = state("on"),
                          state("on") + event("turn_off") = state("off"),
                      })
                      .build();
  if (!b.ok()) return nullptr;
  return machine_gate(std::move(*b.table));
}
#endif

// The raw_dedup / raw_inorder rows (see the file comment) on a fresh database at path.
Result run_raw_sqlite(const std::string& path, bool with_entity, const std::vector<BMsg>& stream, const Streams& s) {
  Result r;
  sqlite3* db = nullptr;
  auto fail = [&](const std::string& what) {
    r.error = what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close_v2(db);
    return r;
  };
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return fail("open " + path);
  for (const char* sql :
       {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
        "PRAGMA cache_size=-65536", "CREATE TABLE done(id TEXT PRIMARY KEY, expires INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE entity(key TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID"}) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return fail(sql);
  }
  const char* sqls[] = {"SELECT expires FROM done WHERE id = ?1",
                        "SELECT version FROM entity WHERE key = ?1",
                        "BEGIN",
                        "INSERT INTO done(id, expires) VALUES(?1, ?2)",
                        "INSERT OR REPLACE INTO entity(key, version) VALUES(?1, ?2)",
                        "COMMIT"};
  std::vector<sqlite3_stmt*> st(std::size(sqls), nullptr);
  for (std::size_t i = 0; i < st.size(); ++i) {
    if (sqlite3_prepare_v3(db, sqls[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i], nullptr) != SQLITE_OK)
      return fail(sqls[i]);
  }
  auto text = [](sqlite3_stmt* q, int at, std::string_view v) {
    sqlite3_bind_text(q, at, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  };
  auto step = [&](sqlite3_stmt* q) {
    int rc = sqlite3_step(q);
    while (rc == SQLITE_ROW) rc = sqlite3_step(q);
    sqlite3_reset(q);
    return rc == SQLITE_DONE;
  };
  std::vector<std::uint64_t> last(s.keys, 0);
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_now();
  bool ok = true;
  for (const BMsg& m : stream) {
    text(st[0], 1, m.id);
    ok = step(st[0]);
    if (with_entity) {
      text(st[1], 1, m.key);
      ok = ok && step(st[1]);
    }
    ok = ok && step(st[2]);
    text(st[3], 1, m.id);
    sqlite3_bind_int64(st[3], 2, static_cast<std::int64_t>(m.version) + 86'400'000);
    ok = ok && step(st[3]);
    if (with_entity) {
      text(st[4], 1, m.key);
      sqlite3_bind_int64(st[4], 2, static_cast<std::int64_t>(m.version));
      ok = ok && step(st[4]);
    }
    ok = ok && step(st[5]);
    if (!ok) break;
    if (m.version != last[m.key_index] + 1) ++r.order_errors;
    last[m.key_index] = m.version;
    ++r.processed;
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.cpu_seconds = cpu_now() - cpu0;
  r.messages = stream.size();
  r.complete = std::all_of(last.begin(), last.end(), [&](std::uint64_t v) { return v == s.versions; });
  if (!ok) r.error = std::string("raw sqlite: ") + sqlite3_errmsg(db);
  for (sqlite3_stmt* q : st) sqlite3_finalize(q);
  sqlite3_close_v2(db);
  return r;
}

// batch 0: Consumer::process per delivery; else process_batch of `batch` deliveries.
Result run(const std::string& uri, Mode mode, const std::vector<BMsg>& stream, const Streams& s, std::size_t batch) {
  Result r;
  auto store = open_store(uri);
  if (!store.ok()) {
    r.error = "open_store(" + uri + "): " + store.status().to_string();
    return r;
  }
  std::vector<std::uint64_t> last(s.keys, 0);
  auto handler = [&](const BMsg& m, HandlerContext&) {
    if (m.version != last[m.key_index] + 1) ++r.order_errors;
    last[m.key_index] = std::max(last[m.key_index], m.version);
    return HandlerResult::ok();
  };
  ConsumerOptions o;
  o.store = std::move(store).value();
  Extractors<BMsg> x;
  x.id = [](const BMsg& m) { return std::optional<std::string_view>(m.id); };
  if (mode == Mode::kStrict) {
    x.key = [](const BMsg& m) { return std::optional<std::string_view>(m.key); };
    x.version = [](const BMsg& m) { return std::optional<std::uint64_t>(m.version); };
    x.encode = encode;
    x.decode = decode;
    o.ordering.mode = Ordering::kStrict;
    o.on_buffered = [&](const BufferedOutcome& b) {
      if (b.decision.action == Action::kAck && b.decision.reason == Reason::kProcessed)
        ++r.drained_processed;
      else
        ++r.other;
    };
  }
  if (mode == Mode::kMachine) {
#ifdef IDEM_BENCH_WITH_MACHINE
    x.key = [](const BMsg& m) { return std::optional<std::string_view>(m.key); };
    x.event = [](const BMsg& m) { return std::optional<std::string_view>(m.event); };
    o.machine = two_state_machine();
    if (!o.machine) {
      r.error = "the 2-state machine did not build";
      return r;
    }
#else
    r.error = "built without idem::statemachine";
    return r;
#endif
  }
  auto c = Consumer<BMsg>::create(std::move(o), std::move(x), handler);
  if (!c.ok()) {
    r.error = "Consumer::create: " + c.status().to_string();
    return r;
  }
  Consumer<BMsg>& consumer = *c;
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_now();
  auto count = [&](const Decision& d) {
    if (d.reason == Reason::kProcessed && d.action == Action::kAck)
      ++r.processed;
    else if (d.reason == Reason::kBuffered && d.action != Action::kRetry && d.action != Action::kDeadLetter)
      ++r.buffered;
    else
      ++r.other;
  };
  if (batch == 0) {
    for (const BMsg& m : stream) count(consumer.process(m));
  } else {
    const std::span<const BMsg> all(stream);
    for (std::size_t at = 0; at < all.size(); at += batch)
      for (const Decision& d : consumer.process_batch(all.subspan(at, std::min(batch, all.size() - at)))) count(d);
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.cpu_seconds = cpu_now() - cpu0;
  r.messages = stream.size();
  r.complete = std::all_of(last.begin(), last.end(), [&](std::uint64_t v) { return v == s.versions; });
  return r;
}

// ---- the table ------------------------------------------------------------------------

struct Row {
  std::string store;  // "memory", "sqlite", "rocksdb"
  std::string kind;   // "dedup", "inorder", "early30", "machine"
  std::vector<Result> runs;

  double median_rate() const {
    std::vector<double> rates;
    for (const Result& r : runs) rates.push_back(r.rate());
    if (rates.empty()) return 0;
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  }
  double median_cpu_rate() const {
    std::vector<double> rates;
    for (const Result& r : runs)
      rates.push_back(r.cpu_seconds > 0 ? static_cast<double>(r.messages) / r.cpu_seconds : 0);
    if (rates.empty()) return 0;
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  }
  bool exact() const {
    return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const Result& r) { return r.exact(); });
  }
};

struct Target {
  std::string row, baseline;
  double min_ratio;        // 0: reported only
  const char* only_store;  // the target applies on this store only (nullptr: every store)
};

const Target kTargets[] = {
    {"inorder", "dedup", 0.8, nullptr},       {"early30", "inorder", 0.5, nullptr},
    {"raw_inorder", "raw_dedup", 0, nullptr}, {"machine", "dedup", 0.8, "sqlite"},
    {"inorder_b", "dedup_b", 0.8, nullptr},   {"early30_b", "inorder_b", 0.5, nullptr},
    {"machine_b", "dedup_b", 0.8, "sqlite"},
};

const Row* find_row(const std::vector<Row>& rows, const std::string& store, const std::string& kind) {
  for (const Row& r : rows)
    if (r.store == store && r.kind == kind) return &r;
  return nullptr;
}

int print_table(const std::vector<Row>& rows, bool strict) {
  bool wrong = false, failed = false;
  std::printf("%-18s %12s %12s %8s  %-32s %-8s %s\n", "row", "msgs/s", "msgs/cpu-s", "runs", "ratio", "target",
              "result");
  std::printf("%s\n", std::string(106, '-').c_str());
  for (const Row& r : rows) {
    const bool exact = r.exact();
    wrong = wrong || !exact;
    std::vector<std::string> tails;
    for (const Target& t : kTargets) {
      if (t.row != r.kind) continue;
      const Row* base = find_row(rows, r.store, t.baseline);
      if (base == nullptr || base->median_rate() <= 0) continue;
      const double ratio = r.median_rate() / base->median_rate();
      const double cpu_ratio = base->median_cpu_rate() > 0 ? r.median_cpu_rate() / base->median_cpu_rate() : 0;
      const bool applies = t.only_store == nullptr || r.store == t.only_store;
      char what[64], target[16] = "", line[128];
      std::snprintf(what, sizeof what, "%.2fx %s (cpu %.2fx)", ratio, t.baseline.c_str(), cpu_ratio);
      const char* verdict = "";
      if (applies && t.min_ratio > 0) {
        const bool ok = ratio >= t.min_ratio;
        failed = failed || !ok;
        std::snprintf(target, sizeof target, ">= %.2fx", t.min_ratio);
        verdict = ok ? "PASS" : "FAIL";
      }
      std::snprintf(line, sizeof line, "%-32s %-8s %s", what, target, verdict);
      tails.emplace_back(line);
    }
    if (tails.empty()) tails.emplace_back("(baseline)");
    const std::string name = r.store + " " + r.kind;
    std::printf("%-18s %12s %12s %7zu%s  %s\n", name.c_str(), with_commas(r.median_rate()).c_str(),
                with_commas(r.median_cpu_rate()).c_str(), r.runs.size(), exact ? " " : "!", tails[0].c_str());
    for (std::size_t i = 1; i < tails.size(); ++i) std::printf("%-54s  %s\n", "", tails[i].c_str());
  }
  std::printf("%s\n", std::string(106, '-').c_str());
  std::printf(
      "msgs/s: median over the runs, wall time (the targets); msgs/cpu-s: this process's CPU time, steadier\n"
      "on a busy machine but blind to I/O waits; (cpu …x): the ratio of the msgs/cpu-s medians.\n");
  std::fflush(stdout);
  for (const Row& r : rows) {
    for (std::size_t i = 0; i < r.runs.size(); ++i) {
      const Result& x = r.runs[i];
      if (x.exact()) continue;
      std::fprintf(stderr,
                   "idem_bench_ordering: %s %s run %zu WRONG: %s processed %llu + drained %llu of %llu, buffered %llu, "
                   "other %llu, out-of-order handler calls %llu, every key complete: %s\n",
                   r.store.c_str(), r.kind.c_str(), i + 1, x.error.c_str(),
                   static_cast<unsigned long long>(x.processed), static_cast<unsigned long long>(x.drained_processed),
                   static_cast<unsigned long long>(x.messages), static_cast<unsigned long long>(x.buffered),
                   static_cast<unsigned long long>(x.other), static_cast<unsigned long long>(x.order_errors),
                   x.complete ? "yes" : "no");
    }
  }
  if (wrong) {
    std::printf("'!' marks a row that MISCOUNTED or saw a version out of order (details on stderr)\n");
    return 1;
  }
  std::printf("every row: each key's versions handled exactly once, in order; every delivery processed\n");
  return strict && failed ? 3 : 0;
}

int main(int argc, char** argv) {
  CLI::App app{"idem ordering benchmark: strict ordering and a state machine vs dedup alone, per store"};
  std::size_t messages = 100'000;
  std::uint32_t keys = 64;
  std::size_t window = 8;
  double early = 0.30;
  std::uint64_t seed = 20261129;
  int repeat = 3;
  bool quick = false, strict = false;
  std::string dir = "/tmp";
  std::vector<std::string> stores = {"memory", "sqlite", "rocksdb"};
  std::size_t memory_scale = 10;
  std::size_t batch = 1000;
  app.add_option("-n,--messages", messages, "deliveries per row (default 100000)");
  app.add_flag("--quick", quick, "CI-size run: 10000 deliveries, 1 run per row");
  app.add_option("--keys", keys, "entity keys (default 64)")->check(CLI::Range(1u, 1u << 20));
  app.add_option("--window", window, "early30: the reorder window in versions (default 8)")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1000}));
  app.add_option("--early", early, "early30: share of deliveries that arrive early (default 0.30)")
      ->check(CLI::Range(0.0, 0.8));
  app.add_option("--repeat", repeat, "runs per row, interleaved; the median is reported (default 3)")
      ->check(CLI::Range(1, 100));
  app.add_option("--seed", seed, "seed of the early30 stream (default 20261129)");
  app.add_option("--dir", dir, "directory for the temporary databases (default /tmp)");
  app.add_option("--stores", stores, "stores to run (default memory,sqlite,rocksdb; those not built are skipped)")
      ->delimiter(',');
  app.add_option("--memory-scale", memory_scale, "the memory rows' stream is this many times longer (default 10)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000}));
  app.add_option(
         "-b,--batch", batch,
         "deliveries per process_batch call in the *_b rows; 0: no *_b rows (default 1000, as idem_bench_dedup)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{100'000}));
  app.add_flag("--strict", strict, "exit 3 if a performance target fails");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    messages = 10'000;
    if (app.count("--repeat") == 0) repeat = 1;
  }
  if (messages < keys) {
    std::fprintf(stderr, "idem_bench_ordering: --messages must be >= --keys\n");
    return 2;
  }

  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/idem-bench-ordering-XXXXXX", dir.c_str());
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("idem_bench_ordering: mkdtemp");
    return 2;
  }
  const std::filesystem::path tmp = tmpl;

  const Streams s = make_streams(messages, keys, window, early, seed);
  const Streams sm = make_streams(messages * memory_scale, keys, window, early, seed);
  std::printf("idem_bench_ordering\n");
  std::printf("  vCPUs: %u (%s), shared and noisy: compare the RATIOS, not absolute rates\n",
              std::thread::hardware_concurrency(), first_line_of("/proc/cpuinfo", "model name").c_str());
  std::printf("  load average at start: %s\n", first_line_of("/proc/loadavg", "").c_str());
#ifdef NDEBUG
  std::printf("  build: optimised (NDEBUG)\n");
#else
  std::printf("  build: NOT optimised or assertions on: configure with -DCMAKE_BUILD_TYPE=Release\n");
#endif
  std::printf(
      "  stream: %u keys x %llu versions = %zu deliveries, round-robin over keys; early30: %.1f%% of "
      "deliveries early (window %zu)\n",
      s.keys, static_cast<unsigned long long>(s.versions), s.in_order.size(), 100 * s.early_share, window);
  std::printf("  memory rows: %u keys x %llu versions = %zu deliveries (--memory-scale %zu); early30: %.1f%%\n",
              sm.keys, static_cast<unsigned long long>(sm.versions), sm.in_order.size(), memory_scale,
              100 * sm.early_share);
  std::printf(
      "  single thread; Consumer::process (rows *_b: process_batch of %zu); effectively_once; default options;"
      " system clock; databases in %s; %d run(s) per row\n\n",
      batch, tmp.c_str(), repeat);

  struct Plan {
    std::string store, kind;
    Mode mode;
    const std::vector<BMsg>* stream;
    const Streams* streams;
    std::size_t batch;  // 0: process() per delivery
  };
  std::vector<Plan> plan;
  for (const std::string& st : stores) {
    if (st != "memory" && st != "sqlite" && st != "rocksdb") {
      std::fprintf(stderr, "idem_bench_ordering: unknown store %s (memory, sqlite, rocksdb)\n", st.c_str());
      return 2;
    }
    const Streams& x = st == "memory" ? sm : s;
    for (std::size_t b : {std::size_t{0}, batch}) {
      const std::string tail = b == 0 ? "" : "_b";
      plan.push_back({st, "dedup" + tail, Mode::kDedup, &x.in_order, &x, b});
      plan.push_back({st, "inorder" + tail, Mode::kStrict, &x.in_order, &x, b});
      plan.push_back({st, "early30" + tail, Mode::kStrict, &x.early, &x, b});
#ifdef IDEM_BENCH_WITH_MACHINE
      plan.push_back({st, "machine" + tail, Mode::kMachine, &x.in_order, &x, b});
#endif
      if (st == "sqlite" && b == 0) {
        plan.push_back({st, "raw_dedup", Mode::kRawDedup, &x.in_order, &x, 0});
        plan.push_back({st, "raw_inorder", Mode::kRawInorder, &x.in_order, &x, 0});
      }
      if (batch == 0) break;
    }
  }

  std::vector<Row> rows;
  for (const Plan& p : plan) rows.push_back({p.store, p.kind, {}});
  for (int rep = 0; rep < repeat; ++rep) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Plan& p = plan[i];
      const std::filesystem::path where = tmp / (p.store + "-" + p.kind);
      std::error_code ec;
      std::filesystem::remove_all(where, ec);
      std::string uri = p.store == "memory" ? std::string("memory:") : p.store + ":" + where.string();
      std::fprintf(stderr, "run %d/%d %-8s %-10s ...", rep + 1, repeat, p.store.c_str(), p.kind.c_str());
      const bool raw = p.mode == Mode::kRawDedup || p.mode == Mode::kRawInorder;
      Result r = raw ? run_raw_sqlite(where.string(), p.mode == Mode::kRawInorder, *p.stream, *p.streams)
                     : run(uri, p.mode, *p.stream, *p.streams, p.batch);
      std::filesystem::remove_all(where, ec);
      for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(where.string() + suffix, ec);
      if (!r.error.empty() && r.error.find("unknown") != std::string::npos &&
          r.error.find("scheme") != std::string::npos) {
        std::fprintf(stderr, " not built, skipped\n");
        rows[i].store.clear();
        continue;
      }
      std::fprintf(stderr, " %12s msgs/s, %llu buffered%s\n", with_commas(r.rate()).c_str(),
                   static_cast<unsigned long long>(r.buffered), r.exact() ? "" : "  WRONG");
      rows[i].runs.push_back(std::move(r));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  std::erase_if(rows, [](const Row& r) { return r.store.empty(); });
  return print_table(rows, strict);
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) { return idem::bench::main(argc, argv); }
