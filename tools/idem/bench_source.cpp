// `idem bench --source URI`: three rows through idem's runtime with the same messages,
// handler, workers and batch, each round on ids of its own:
//   plain  the user's broker, at_least_once, no store: the broker's loop as idem runs it
//   floor  the user's store, effectively_once, over an in-memory source: the engine alone
//   idem   both: what `idem consume` would do
// The broker rows publish to destinations of their own (the URI's names with a suffix),
// removed after the row. A row's rate runs from its first delivery's receipt to its
// last decision (a consumer group's join is not timed); its latency is each delivery's
// receipt to its decision applied.
#include "bench_source.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../../bench/id_stream.hpp"
#include "../../bench/vector_source.hpp"
#include "bench_rows.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/consumer.hpp"
#include "idem/open_source.hpp"
#include "idem/open_store.hpp"
#include "idem/runtime.hpp"

namespace idem::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kDefaultMessages = 20'000;
constexpr std::size_t kPublishChunk = 1'000;
constexpr auto kStall = std::chrono::seconds(30);  // a row with no decision for this long has lost messages
constexpr auto kRecordTtl = std::chrono::hours(1);
enum Path : std::size_t { kPlain, kFloor, kIdem, kPathCount };
constexpr const char* kPaths[kPathCount] = {"plain", "floor", "idem"};

struct BenchMsg {
  std::string id;
  Clock::time_point received;
};

// What one row's handlers and decisions saw. Thread-safe.
class Tally {
 public:
  void ran(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    ++runs_[id];
  }

  void applied(Clock::time_point received) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> l(mu_);
    first_ = latency_ns_.empty() ? received : std::min(first_, received);
    last_ = now;
    latency_ns_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(now - received).count());
    progress_.store(now.time_since_epoch().count());
  }

  // Whether no decision came for `d` (counting from `since` before the first).
  bool stalled(Clock::time_point since, Clock::duration d) const {
    const Clock::rep p = progress_.load();
    return Clock::now() - (p == 0 ? since : Clock::time_point(Clock::duration(p))) > d;
  }

  // Read once the runtime has stopped.
  std::unordered_map<std::string, int> runs_;  // handler runs per id
  std::vector<std::int64_t> latency_ns_;       // per decision: receipt to applied
  Clock::time_point first_, last_;             // the first receipt, the last decision

 private:
  std::mutex mu_;
  std::atomic<Clock::rep> progress_{0};
};

struct RowResult {
  std::string path;
  double msgs_per_s = 0, p50_us = 0, p99_us = 0;
  std::string wrong;  // empty: every message ran as often as it should
};

// Removes a destination made for a row when the row ends, however it ends.
class Scratch {
 public:
  explicit Scratch(std::string uri) : uri_(std::move(uri)) {}
  ~Scratch() {
    if (Status s = remove_destination(uri_); !s.ok())
      std::cerr << "idem bench: could not remove " << scrub_secrets(uri_, uri_) << ": "
                << scrub_secrets(s.to_string(), uri_) << '\n';
  }
  const std::string& uri() const { return uri_; }

 private:
  std::string uri_;
};

class SourceBench {
 public:
  explicit SourceBench(const SourceBenchArgs& a) : a_(a) {}

  int run() {
    if (int bad = check_args(); bad != kExitOk) return bad;
    bench::StreamOptions so;
    so.messages = a_.messages != 0 ? a_.messages : kDefaultMessages;
    so.duplicate_share = a_.duplicates;
    stream_ = bench::make_stream(so);
    nonce_ = random_nonce();
    std::vector<std::vector<RowResult>> rounds(kPathCount);
    try {
      for (int r = 0; r < a_.repeat; ++r)
        for (std::size_t p = 0; p < kPathCount; ++p) rounds[p].push_back(run_row(static_cast<Path>(p), r));
    } catch (const std::exception& e) {
      std::cerr << "idem bench: " << scrub_secrets(e.what(), a_.source) << '\n';
      return kExitFailure;
    }
    return report(rounds);
  }

 private:
  int check_args() {
    const std::size_t colon = a_.source.find("://");
    scheme_ = a_.source.substr(0, colon == std::string::npos ? 0 : colon);
    auto probe = with_destination_suffix(a_.source, "-x");
    if (!probe.ok()) return usage("--source: " + scrub_secrets(probe.status().message(), a_.source));
    if (auto u = StoreUri::parse(a_.store); !u.ok()) return usage("--store: " + u.status().to_string());
    if (a_.workers < 1 || a_.workers > 256) return usage("--workers must be in [1, 256]");
    if (a_.batch < 1 || a_.batch > 10'000) return usage("--batch must be in [1, 10000]");
    if (a_.handler_ms < 0 || a_.handler_ms > 10'000) return usage("--handler-ms must be in [0, 10000]");
    if (a_.duplicates < 0 || a_.duplicates >= 1) return usage("--duplicates must be in [0, 1)");
    if (a_.repeat < 1 || a_.repeat > 100) return usage("--repeat must be in [1, 100]");
    return kExitOk;
  }

  static int usage(const std::string& why) {
    std::cerr << "idem bench: " << why << '\n';
    return kExitUsage;
  }

  // Row `path`'s ids in round `round`: the stream's, with a prefix of their own.
  std::vector<std::string> ids_for(Path path, int round) const {
    const std::string prefix =
        "idem-bench-" + nonce_ + "-" + kPaths[path] + "-" + std::to_string(round) + "-";
    std::vector<std::string> ids;
    ids.reserve(stream_.messages.size());
    for (const bench::Msg& m : stream_.messages) ids.push_back(prefix + m.id);
    return ids;
  }

  static void publish(const std::string& uri, const std::vector<std::string>& ids) {
    auto p = open_publisher(uri);
    if (!p.ok()) throw std::runtime_error("cannot open a publisher: " + p.status().to_string());
    std::vector<OutgoingMessage> chunk;
    for (std::size_t i = 0; i < ids.size(); i += kPublishChunk) {
      chunk.clear();
      // The id travels in the body only: a broker that deduplicates by the message id
      // (JetStream's Nats-Msg-Id) would drop the re-sends the rows must see.
      for (std::size_t j = i; j < std::min(ids.size(), i + kPublishChunk); ++j) chunk.push_back({{}, ids[j], {}, {}});
      if (Status s = (*p)->publish(chunk); !s.ok()) throw std::runtime_error("publish: " + s.to_string());
    }
  }

  std::unique_ptr<Consumer<BenchMsg>> consumer(bool with_store, Tally& tally) const {
    ConsumerOptions o;
    o.guarantee = with_store ? Guarantee::kEffectivelyOnce : Guarantee::kAtLeastOnce;
    o.ttl = kRecordTtl;
    if (with_store) {
      auto store = open_store(a_.store);
      if (!store.ok()) throw std::runtime_error("cannot open the store: " + store.status().to_string());
      o.store = std::move(store).value();
    }
    Extractors<BenchMsg> ex;
    ex.id = [](const BenchMsg& m) { return std::optional<std::string_view>(m.id); };
    const auto sleep = std::chrono::duration<double, std::milli>(a_.handler_ms);
    auto c = Consumer<BenchMsg>::create(std::move(o), std::move(ex), [&tally, sleep](const BenchMsg& m, HandlerContext&) {
      if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
      tally.ran(m.id);
      return HandlerResult::ok();
    });
    if (!c.ok()) throw std::runtime_error("Consumer::create: " + c.status().to_string());
    return std::make_unique<Consumer<BenchMsg>>(std::move(c).value());
  }

  RowResult run_row(Path path, int round) const {
    const std::vector<std::string> ids = ids_for(path, round);
    std::unique_ptr<Scratch> scratch;
    std::unique_ptr<MessageSource> source;
    if (path == kFloor) {
      source = std::make_unique<bench::VectorSource>(ids);
    } else {
      auto uri = with_destination_suffix(a_.source, "-idem-bench-" + nonce_ + "-" + kPaths[path] + "-" +
                                                         std::to_string(round));
      scratch = std::make_unique<Scratch>(uri.value());  // the URI passed check_args()
      publish(scratch->uri(), ids);
      auto s = open_source(scratch->uri());
      if (!s.ok()) throw std::runtime_error("cannot open the source: " + s.status().to_string());
      source = std::move(s).value();
    }
    Tally tally;
    run_runtime(*source, *consumer(path != kPlain, tally), tally);
    source->close();
    return result(path, tally);
  }

  // Runs the runtime until it decided every delivery, or stops it when decisions
  // stall (the row's count check then fails).
  void run_runtime(MessageSource& source, Consumer<BenchMsg>& c, Tally& tally) const {
    RuntimeOptions ro;
    ro.workers = a_.workers;
    ro.batch = a_.batch;
    ro.max_messages = stream_.messages.size();
    auto decode = [](const Delivery& d) { return StatusOr<BenchMsg>(BenchMsg{d.body, Clock::now()}); };
    auto applied = [&tally](const Delivery&, const BenchMsg* m, const Decision&) {
      if (m != nullptr) tally.applied(m->received);
    };
    auto rt = Runtime<BenchMsg>::create(ro, source, c, decode, applied);
    if (!rt.ok()) throw std::runtime_error("Runtime::create: " + rt.status().to_string());
    std::atomic<bool> done{false};
    const Clock::time_point start = Clock::now();
    std::thread watchdog([&] {
      while (!done.load() && !tally.stalled(start, kStall)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      (*rt)->stop();
    });
    const Status s = (*rt)->run();
    done.store(true);
    watchdog.join();
    if (!s.ok()) throw std::runtime_error("the runtime stopped: " + s.to_string());
  }

  RowResult result(Path path, Tally& t) const {
    RowResult r{kPaths[path]};
    const double seconds = std::chrono::duration<double>(t.last_ - t.first_).count();
    r.msgs_per_s = seconds > 0 ? static_cast<double>(t.latency_ns_.size()) / seconds : 0;
    r.p50_us = quantile_us(t.latency_ns_, 0.50);
    r.p99_us = quantile_us(t.latency_ns_, 0.99);
    r.wrong = wrong_counts(path, t);
    return r;
  }

  // plain runs every delivery (duplicates too); floor and idem every distinct id once.
  std::string wrong_counts(Path path, const Tally& t) const {
    std::size_t runs = 0, wrong = 0;
    for (const auto& [id, n] : t.runs_) {
      runs += static_cast<std::size_t>(n);
      if (path != kPlain && n != 1) ++wrong;
    }
    const std::size_t expected = path == kPlain ? stream_.messages.size() : stream_.unique;
    if (t.latency_ns_.size() == stream_.messages.size() && t.runs_.size() == stream_.unique && runs == expected &&
        wrong == 0)
      return {};
    return std::to_string(t.latency_ns_.size()) + " of " + std::to_string(stream_.messages.size()) +
           " deliveries decided, " + std::to_string(t.runs_.size()) + " of " + std::to_string(stream_.unique) +
           " distinct ids handled, " + std::to_string(runs) + " handler runs (expected " + std::to_string(expected) +
           "), " + std::to_string(wrong) + " ids run more than once";
  }

  int report(std::vector<std::vector<RowResult>>& rounds) const;

  SourceBenchArgs a_;
  std::string scheme_;
  bench::Stream stream_;
  std::string nonce_;
};

int SourceBench::report(std::vector<std::vector<RowResult>>& rounds) const {
  std::printf("idem bench: broker=%s, store=%s, %zu deliveries per row (%zu distinct ids, %zu re-sent), %zu workers, "
              "batch %zu, handler %g ms",
              scheme_.c_str(), a_.store.c_str(), stream_.messages.size(), stream_.unique, stream_.duplicates,
              a_.workers, a_.batch, a_.handler_ms);
  if (a_.repeat > 1) std::printf(", median of %d rounds", a_.repeat);
  std::printf("\n\n%-8s %12s %12s %12s\n", "path", "msgs/s", "p50_us", "p99_us");
  std::vector<RowResult> medians;
  bool all_right = true;
  for (auto& of_path : rounds) {
    for (std::size_t r = 0; r < of_path.size(); ++r) {
      if (of_path[r].wrong.empty()) continue;
      all_right = false;
      std::cerr << "idem bench: row " << of_path[r].path << " (round " << r + 1 << "): " << of_path[r].wrong << '\n';
    }
    std::sort(of_path.begin(), of_path.end(), [](const RowResult& a, const RowResult& b) { return a.msgs_per_s < b.msgs_per_s; });
    medians.push_back(of_path[of_path.size() / 2]);
    const RowResult& m = medians.back();
    std::printf("%-8s %12.0f %12.1f %12.1f\n", m.path.c_str(), m.msgs_per_s, m.p50_us, m.p99_us);
  }
  std::printf("\n");
  for (const RowResult& m : medians)
    std::printf("BENCH broker=%s path=%s workers=%zu handler_ms=%g msgs_per_s=%.0f p50_us=%.1f p99_us=%.1f\n",
                scheme_.c_str(), m.path.c_str(), a_.workers, a_.handler_ms, m.msgs_per_s, m.p50_us, m.p99_us);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  std::printf("RATIO broker=%s idem/plain=%.2f idem/floor=%.2f\n", scheme_.c_str(),
              ratio(medians[kIdem].msgs_per_s, medians[kPlain].msgs_per_s),
              ratio(medians[kIdem].msgs_per_s, medians[kFloor].msgs_per_s));
  std::fflush(stdout);
  return all_right ? kExitOk : kExitFailure;
}

}  // namespace

int run_source_bench(const SourceBenchArgs& args) { return SourceBench(args).run(); }

}  // namespace idem::cli
