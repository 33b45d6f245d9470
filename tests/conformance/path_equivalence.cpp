// The differential property test of the engine's paths: one random trace of
// deliveries (ids and their copies, keys, versions, events, payloads that conflict,
// handlers that fail, throw or ask for a retry, store calls that fail) goes through
// Consumer::process, process_batch (random batch sizes), process(m, next) and a
// Runtime over an in-memory source, each on a fresh store of the factory under test.
// Every path must give each delivery the same decision, show its handler the same
// contexts field by field, and leave the store with the same records and entities.
//
// Store faults are injected by id (FaultyStore below) rather than by the factory's
// fault hook: a hook fails the whole store call it sits in, and a batch call holds
// several deliveries, so a hook's fault would fall on different deliveries on
// different paths. Failing the calls of chosen ids fails the same deliveries on all.
//
// What each path must give: process() and process(m, next) the same; the Runtime the
// same except that it forwards a duplicate of a dead-lettered id to the dead-letter
// destination again (dead_letter where the others ack; docs/runtime.md); process_batch
// without entity gates the same; process_batch behind the entity gates (monotonic,
// strict, machine) what process() gives over the batch's own order (batch_order():
// each batch's first copies, under strict ordering each key's in version order, then
// its later copies), as Engine::process_batch documents. Compared in full each time:
// decisions, the handler's contexts, on_buffered's reports, records and entities.
// Commit failures are injected only without entity gates: a commit that fails inside a
// batch chain of entity writes makes the key's later writes in that batch fail too
// (they expect the revision the failed write would have produced), which no order of
// process() calls gives.
// The transactional mode's commits go through the store's transaction, which the
// wrapper does not reach: it runs without injected commit faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "conformance/store_conformance.hpp"
#include "idem/backend/store_wrapper.hpp"
#include "idem/consumer.hpp"
#include "idem/runtime.hpp"
#include "idem/state_gate.hpp"

namespace idem::conformance {
namespace {

enum class Mode { kPlain, kTransactional, kAtLeastOnce, kAtMostOnce, kMonotonic, kStrict, kMachine };
constexpr Mode kModes[] = {Mode::kPlain,     Mode::kTransactional, Mode::kAtLeastOnce, Mode::kAtMostOnce,
                           Mode::kMonotonic, Mode::kStrict,        Mode::kMachine};
enum class Path { kProcess, kBatch, kAhead, kRuntime };
constexpr Path kPaths[] = {Path::kProcess, Path::kBatch, Path::kAhead, Path::kRuntime};

const char* mode_name(Mode m) {
  constexpr const char* kNames[] = {"plain", "transactional", "at_least_once", "at_most_once",
                                    "monotonic", "strict", "machine"};
  return kNames[static_cast<int>(m)];
}
const char* path_name(Path p) {
  constexpr const char* kNames[] = {"process", "process_batch", "process(m, next)", "runtime"};
  return kNames[static_cast<int>(p)];
}
bool gated(Mode m) { return m == Mode::kMonotonic || m == Mode::kStrict || m == Mode::kMachine; }

struct Msg {
  std::size_t seq = 0;  // the delivery's place in the trace
  std::string id, key, event, payload;
  std::uint64_t version = 0;
};

std::string encode(const Msg& m) {
  return std::to_string(m.seq) + "|" + m.id + "|" + m.key + "|" + std::to_string(m.version) + "|" + m.event + "|" +
         m.payload;
}

std::optional<Msg> decode(std::string_view s) {
  std::vector<std::string> f(1);
  for (char c : s) {
    if (c == '|') {
      f.emplace_back();
    } else {
      f.back().push_back(c);
    }
  }
  if (f.size() != 6) return std::nullopt;
  return Msg{std::stoul(f[0]), f[1], f[2], f[4], f[5], std::stoull(f[3])};
}

// A small order machine: create, pay, ship in that order; "void" is never valid.
class OrderGate final : public StateGate {
 public:
  Check check(std::string_view state, std::string_view event) const override {
    static const std::vector<std::pair<std::string_view, std::string_view>> kSteps = {
        {"", "created"}, {"created", "paid"}, {"paid", "shipped"}};
    static const std::vector<std::string_view> kEvents = {"create", "pay", "ship"};
    const auto at = std::find_if(kSteps.begin(), kSteps.end(), [&](const auto& s) { return s.first == state; });
    const auto ev = std::find(kEvents.begin(), kEvents.end(), event);
    Check c;
    c.from = state.empty() ? "new" : state;
    if (ev == kEvents.end()) {
      c.reason = "unknown event";
      return c;
    }
    const auto want = static_cast<std::size_t>(ev - kEvents.begin());
    const auto here = static_cast<std::size_t>(at - kSteps.begin());
    if (want == here) {
      c.answer = Answer::kApply;
      c.to = kSteps[here].second;
    } else {
      c.answer = want > here ? Answer::kNotYetValid : Answer::kNeverValid;
      c.reason = "event " + std::string(event) + " in state " + std::string(c.from);
    }
    return c;
  }
  std::uint32_t max_retries() const override { return 2; }
  Backoff backoff() const override { return Backoff{}; }
};

// Fails the first claim of the ids in `claim_faults` and the first commit of those in
// `commit_faults` with kUnavailable, without reaching the store; every batch form
// fails exactly the entries a one-at-a-time call would.
class FaultyStore final : public StoreWrapper {
 public:
  FaultyStore(std::shared_ptr<Store> s, std::set<std::string> claim_faults, std::set<std::string> commit_faults)
      : StoreWrapper(std::move(s)), claims_(std::move(claim_faults)), commits_(std::move(commit_faults)) {}

  StatusOr<ClaimResult> claim(const ClaimRequest& r) override {
    if (take(claims_, r.id)) return unavailable("injected claim fault");
    return StoreWrapper::claim(r);
  }
  Status commit(const CommitRequest& r) override {
    if (take(commits_, r.id)) return unavailable("injected commit fault");
    return StoreWrapper::commit(r);
  }
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> rs) override {
    return split<StatusOr<ClaimResult>>(rs, claims_, [&](auto part) { return StoreWrapper::claim_batch(part); });
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> rs) override {
    return split<Status>(rs, commits_, [&](auto part) { return StoreWrapper::commit_batch(part); });
  }
  // A faulted claim answered ahead (the lookahead) fails without using up its fault:
  // the engine asks again when it decides on that id, and that claim meets the fault,
  // as process() does.
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    bool claim_faulted = false, commit_faulted = false;
    {
      std::lock_guard lock(mu_);
      claim_faulted = claims_.contains(std::string(q.id));
      commit_faulted = commits_.contains(std::string(c.id));
    }
    if (!claim_faulted && !commit_faulted) return StoreWrapper::commit_then_claim(c, q);
    Status s = commit(c);
    if (claim_faulted) return {std::move(s), unavailable("injected claim fault")};
    return {std::move(s), claim(q)};
  }

 private:
  bool take(std::set<std::string>& ids, std::string_view id) {
    std::lock_guard lock(mu_);
    return ids.erase(std::string(id)) > 0;
  }
  template <class R, class Req, class F>
  std::vector<R> split(std::span<const Req> rs, std::set<std::string>& ids, F&& forward) {
    std::vector<R> out(rs.size(), R(unavailable("injected batch fault")));
    std::vector<Req> pass;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < rs.size(); ++i) {
      if (take(ids, rs[i].id)) continue;
      pass.push_back(rs[i]);
      where.push_back(i);
    }
    if (pass.empty()) return out;
    auto answers = forward(std::span<const Req>(pass));
    for (std::size_t k = 0; k < where.size(); ++k) out[where[k]] = std::move(answers[k]);
    return out;
  }

  std::mutex mu_;
  std::set<std::string> claims_, commits_;
};

struct Trace {
  std::vector<Msg> deliveries;
  std::set<std::string> claim_faults, commit_faults;
  std::vector<std::size_t> batch_sizes;  // process_batch's cuts
  std::size_t runtime_batch = 1;
  std::map<std::string, std::uint32_t> kinds;  // each id's handler behaviour (behave())
};

// Random deliveries: about 30 ids over 4 keys, a third of deliveries copies (some with
// another payload), versions per key shuffled a little, events by version.
Trace make_trace(std::uint32_t seed, Mode mode) {
  std::mt19937 rng(seed);
  auto pct = [&](int p) { return static_cast<int>(rng() % 100) < p; };
  Trace t;
  std::map<std::string, std::uint64_t> versions;
  std::vector<Msg> firsts;
  static const char* kEvents[] = {"create", "pay", "ship", "void"};
  for (std::size_t n = 0; n < 45; ++n) {
    Msg m;
    if (!firsts.empty() && pct(30)) {
      m = firsts[rng() % firsts.size()];
      if (pct(15)) m.payload += "-changed";
    } else {
      m.id = "m" + std::to_string(firsts.size());
      m.key = "k" + std::to_string(rng() % 4);
      m.version = ++versions[m.key];
      m.event = kEvents[std::min<std::uint64_t>(m.version, 4) - 1];
      m.payload = "p" + std::to_string(rng() % 1000);
      firsts.push_back(m);
      t.kinds[m.id] = static_cast<std::uint32_t>(rng() % 17);
      if (pct(8)) t.claim_faults.insert(m.id);
      if (!gated(mode) && mode != Mode::kTransactional && pct(8)) t.commit_faults.insert(m.id);
    }
    t.deliveries.push_back(m);
  }
  // Every trace meets each failing behaviour: three ids, chosen at random, get them.
  std::shuffle(firsts.begin(), firsts.end(), rng);
  for (std::uint32_t k = 0; k < 3 && k < firsts.size(); ++k) t.kinds[firsts[k].id] = k;
  for (std::size_t i = 0; i + 1 < t.deliveries.size(); ++i) {
    if (pct(25)) std::swap(t.deliveries[i], t.deliveries[i + 1]);
  }
  for (std::size_t i = 0; i < t.deliveries.size(); ++i) t.deliveries[i].seq = i;
  for (std::size_t left = t.deliveries.size(); left > 0;) {
    const std::size_t n = std::min<std::size_t>(left, 1 + rng() % 8);
    t.batch_sizes.push_back(n);
    left -= n;
  }
  t.runtime_batch = 1 + rng() % 4;
  return t;
}

// The trace as lines, for a failure's message.
std::string show(const Trace& t) {
  std::ostringstream o;
  o << "trace (seq id key version event payload):\n";
  for (const Msg& m : t.deliveries) {
    o << "  " << m.seq << " " << m.id << " " << m.key << " v" << m.version << " " << m.event << " " << m.payload
      << (t.claim_faults.contains(m.id) ? " claim-fault" : "") << (t.commit_faults.contains(m.id) ? " commit-fault" : "")
      << "\n";
  }
  o << "  batches:";
  for (std::size_t n : t.batch_sizes) o << " " << n;
  o << "; runtime batch " << t.runtime_batch << "\n";
  return o.str();
}

// The order in which process_batch behind the entity gates runs the trace, as
// documented on Engine::process_batch: in each batch, the first copy of each id (under
// strict ordering each key's first copies in version order, keys in the order they
// first appear), then the batch's later copies in input order. process() over this
// order is what that path must give.
Trace batch_order(const Trace& t, Mode mode) {
  Trace out = t;
  out.deliveries.clear();
  std::size_t at = 0;
  for (std::size_t n : t.batch_sizes) {
    const std::span<const Msg> batch(t.deliveries.data() + at, n);
    at += n;
    std::vector<const Msg*> firsts, repeats;
    std::vector<std::string> keys;  // in the order of first appearance
    std::set<std::string> ids;
    for (const Msg& m : batch) {
      if (std::find(keys.begin(), keys.end(), m.key) == keys.end()) keys.push_back(m.key);
      (ids.insert(m.id).second ? firsts : repeats).push_back(&m);
    }
    if (mode == Mode::kStrict) {
      auto rank = [&](const Msg* m) { return std::find(keys.begin(), keys.end(), m->key) - keys.begin(); };
      std::stable_sort(firsts.begin(), firsts.end(), [&](const Msg* a, const Msg* b) {
        return rank(a) != rank(b) ? rank(a) < rank(b) : a->version < b->version;
      });
    }
    for (const Msg* m : firsts) out.deliveries.push_back(*m);
    for (const Msg* m : repeats) out.deliveries.push_back(*m);
  }
  return out;
}

// What a handler saw in one call.
struct Seen {
  std::string id, key, event, from, to;
  std::uint32_t attempt = 0;
  std::uint64_t version = 0;
  bool drained = false;
  bool operator==(const Seen&) const = default;
};

std::string show(const Seen& s) {
  std::ostringstream o;
  o << "{id " << s.id << " attempt " << s.attempt << " key " << s.key << " version " << s.version << " event "
    << s.event << " " << s.from << "->" << s.to << (s.drained ? " drained" : "") << "}";
  return o.str();
}

std::string show(const Decision& d) {
  std::ostringstream o;
  o << action_name(d.action) << "/" << reason_name(d.reason) << " delay " << d.delay.count() << " result "
    << d.result.value_or("-") << (d.dead_lettered ? " dead-lettered before" : "");
  return o.str();
}

// The handler's answer depends only on the id's kind (Trace::kinds) and the attempt, so
// that every path meets the same failures.
HandlerResult behave(const Msg& m, const HandlerContext& ctx, std::uint32_t h) {
  if (h == 0 && ctx.attempt() == 1) return HandlerResult::fail("first attempt fails");
  if (h == 1 && ctx.attempt() == 1) return HandlerResult::retry_after(Duration(40), "later");
  if (h == 2) throw std::runtime_error("always throws");
  if (h % 5 == 3) return HandlerResult::ok();
  return HandlerResult::ok("r:" + m.id);
}

// One path's run of a trace: its outputs.
struct Outcome {
  std::map<std::size_t, Decision> decisions;         // by seq
  std::map<std::size_t, std::vector<Seen>> contexts;  // by seq, in call order
  std::map<std::string, std::string> records;         // by id: a description of inspect()
  std::map<std::string, std::string> entities;        // by key
  std::map<std::string, std::vector<std::string>> buffered;  // strict: on_buffered's decisions, by id
};

class PathRun {
 public:
  PathRun(const StoreFactory& f, Mode mode, const Trace& t) : factory_(f), mode_(mode), trace_(t) {}

  // Runs the trace along `path`; a failure to build is a test failure.
  Outcome run(Path path) {
    location_ = factory_.new_location();
    auto opened = location_->open(nullptr);
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    if (!opened.ok()) return {};
    base_ = std::move(opened).value();
    auto store = std::make_shared<FaultyStore>(base_, trace_.claim_faults, trace_.commit_faults);
    auto consumer = Consumer<Msg>::create(options(store), extractors(), [this](const Msg& m, HandlerContext& ctx) {
      record(m, ctx);
      return behave(m, ctx, trace_.kinds.at(m.id));
    });
    EXPECT_TRUE(consumer.ok()) << consumer.status().to_string();
    if (!consumer.ok()) return {};
    drive(path, *consumer);
    read_state();
    return std::move(out_);
  }

 private:
  ConsumerOptions options(std::shared_ptr<Store> store) {
    ConsumerOptions o;
    o.store = std::move(store);
    o.clock = clock_;
    o.owner = "paths";
    o.allow_probabilistic_store = o.store->capabilities().probabilistic;
    o.max_retries = 2;
    o.latency_metrics = false;
    switch (mode_) {
      case Mode::kPlain:
        break;
      case Mode::kTransactional:
        o.transactional = true;
        break;
      case Mode::kAtLeastOnce:  // keeps nothing in a store
        o.guarantee = Guarantee::kAtLeastOnce;
        o.store = nullptr;
        break;
      case Mode::kAtMostOnce:
        o.guarantee = Guarantee::kAtMostOnce;
        break;
      case Mode::kMonotonic:
        o.ordering.mode = Ordering::kMonotonic;
        break;
      case Mode::kStrict:
        o.ordering.mode = Ordering::kStrict;
        o.ordering.first_version = 1;
        o.on_buffered = [this](const BufferedOutcome& b) {
          std::lock_guard lock(mu_);
          out_.buffered[b.id].push_back(show(b.decision));
        };
        break;
      case Mode::kMachine:
        o.machine = std::make_shared<OrderGate>();
        break;
    }
    return o;
  }

  static Extractors<Msg> extractors() {
    Extractors<Msg> x;
    x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
    x.key = [](const Msg& m) { return std::optional<std::string_view>(m.key); };
    x.version = [](const Msg& m) { return std::optional<std::uint64_t>(m.version); };
    x.event = [](const Msg& m) { return std::optional<std::string_view>(m.event); };
    x.payload = [](const Msg& m) { return std::optional<std::string_view>(m.payload); };
    x.encode = encode;
    x.decode = decode;
    return x;
  }

  void record(const Msg& m, const HandlerContext& c) {
    Seen s{std::string(c.id()),   std::string(c.key()), std::string(c.event()), std::string(c.from()),
           std::string(c.to()),   c.attempt(),          c.version(),           c.drained()};
    std::lock_guard lock(mu_);
    out_.contexts[m.seq].push_back(std::move(s));
  }

  void drive(Path path, Consumer<Msg>& c) {
    const std::vector<Msg>& ds = trace_.deliveries;
    switch (path) {
      case Path::kProcess:
        for (const Msg& m : ds) out_.decisions[m.seq] = c.process(m);
        break;
      case Path::kAhead:
        for (std::size_t i = 0; i < ds.size(); ++i)
          out_.decisions[ds[i].seq] = i + 1 < ds.size() ? c.process(ds[i], ds[i + 1]) : c.process(ds[i]);
        break;
      case Path::kBatch: {
        std::size_t at = 0;
        for (std::size_t n : trace_.batch_sizes) {
          const auto got = c.process_batch(std::span<const Msg>(ds).subspan(at, n));
          for (std::size_t k = 0; k < n; ++k) out_.decisions[ds[at + k].seq] = got[k];
          at += n;
        }
        break;
      }
      case Path::kRuntime:
        run_runtime(c);
        break;
    }
  }

  // Hands out the trace once, in order; records nothing (the runtime's `applied` does).
  class ListSource final : public MessageSource {
   public:
    explicit ListSource(const std::vector<Msg>& ds) {
      for (const Msg& m : ds) queue_.push_back(encode(m));
    }
    Status fetch(std::size_t max, Duration, std::vector<Delivery>& out) override {
      for (std::size_t n = 0; n < max && next_ < queue_.size(); ++n, ++next_) {
        Delivery d;
        d.body = queue_[next_];
        d.broker_id = std::to_string(next_);
        out.push_back(std::move(d));
      }
      return ok_status();
    }
    Status ack(const Delivery&) override { return ok_status(); }
    Status retry(const Delivery&, Duration) override { return ok_status(); }
    Status dead_letter(const Delivery&, std::string_view, std::string_view) override { return ok_status(); }
    std::string describe() const override { return "list"; }
    void close() override {}

   private:
    std::vector<std::string> queue_;
    std::size_t next_ = 0;
  };

  void run_runtime(Consumer<Msg>& c) {
    ListSource source(trace_.deliveries);
    RuntimeOptions ro;
    ro.workers = 2;
    ro.batch = trace_.runtime_batch;
    ro.fetch_timeout = Duration(5);
    ro.max_messages = trace_.deliveries.size();
    auto rt = Runtime<Msg>::create(
        ro, source, c,
        [](const Delivery& d) -> StatusOr<Msg> {
          auto m = decode(d.body);
          if (!m) return invalid_argument("undecodable");
          return *m;
        },
        [this](const Delivery&, const Msg* m, const Decision& d) {
          if (m != nullptr) out_.decisions[m->seq] = d;
        });
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    ASSERT_TRUE((*rt)->run().ok());
  }

  void read_state() {
    const TimePoint now = clock_->now();
    for (const Msg& m : trace_.deliveries) {
      const std::optional<std::string_view> key =
          gated(mode_) ? std::optional<std::string_view>(m.key) : std::nullopt;
      auto r = factory_.inspect(*base_, m.id, key, now);
      std::ostringstream o;
      if (!r.ok()) {
        o << "error " << r.status().to_string();
      } else if (!r->has_value()) {
        o << "none";
      } else {
        const RecordInfo& i = **r;
        o << "state " << static_cast<int>(i.state) << " retries " << i.retries << " result "
          << i.result.value_or("-");
      }
      out_.records[m.id] = o.str();
      if (gated(mode_)) {
        auto e = base_->entities()->read_entity(m.key);
        out_.entities[m.key] = e.ok() ? "version " + std::to_string(e->version) + " state " + e->state +
                                            " revision " + std::to_string(e->revision)
                                      : e.status().to_string();
      }
    }
  }

  const StoreFactory& factory_;
  const Mode mode_;
  const Trace& trace_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<StoreLocation> location_;
  std::shared_ptr<Store> base_;
  std::mutex mu_;
  Outcome out_;
};

bool mode_runs_on(Mode m, const FactoryCapabilities& caps, const StoreCapabilities& store) {
  if (gated(m)) return caps.entities;
  if (m == Mode::kTransactional) return store.transactional;
  return true;
}

// The runtime's one change to a decision: a duplicate of a dead letter is forwarded to
// the dead-letter destination again (src/runtime/loop.cpp).
Decision as_runtime_applies(Decision d) {
  if (d.dead_lettered && d.action == Action::kAck) d.action = Action::kDeadLetter;
  return d;
}

// What `path` must share with `want`: everything, except what the file comment lists.
void expect_same(const Outcome& want, const Outcome& got, Mode mode, Path path) {
  SCOPED_TRACE(std::string(mode_name(mode)) + " via " + path_name(path));
  EXPECT_EQ(got.records, want.records);
  EXPECT_EQ(got.entities, want.entities);
  EXPECT_EQ(got.buffered, want.buffered);
  ASSERT_EQ(got.decisions.size(), want.decisions.size());
  for (const auto& [seq, d] : want.decisions) {
    const auto it = got.decisions.find(seq);
    ASSERT_NE(it, got.decisions.end()) << "delivery " << seq << " got no decision";
    EXPECT_EQ(show(it->second), show(path == Path::kRuntime ? as_runtime_applies(d) : d)) << "delivery " << seq;
  }
  for (const auto& [seq, calls] : want.contexts) {
    const auto it = got.contexts.find(seq);
    ASSERT_NE(it, got.contexts.end()) << "delivery " << seq << " never reached its handler";
    ASSERT_EQ(it->second.size(), calls.size()) << "delivery " << seq;
    for (std::size_t k = 0; k < calls.size(); ++k)
      EXPECT_EQ(show(it->second[k]), show(calls[k])) << "delivery " << seq << " call " << k;
  }
  EXPECT_EQ(got.contexts.size(), want.contexts.size());
}

// The traces each mode runs: IDEM_TRACES (default IDEM_PATH_TRACES, which
// tests/conformance/CMakeLists.txt sets, a quarter of it but at least 3 on a variant
// factory) seeds from IDEM_SEED (default 1) on. A
// failure names its trace's seed; IDEM_SEED=S IDEM_TRACES=1 runs that trace alone, and
// IDEM_SEED=$RANDOM IDEM_TRACES=10000 explores (docs/design.md, which says what such a
// run found).
std::uint32_t env_number(const char* name, std::uint32_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10)) : fallback;
}

// The failures the running test has recorded so far.
int failures() { return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count(); }

TEST_P(StoreConformance, EveryPathDecidesAndShowsTheHandlerTheSame) {
  const std::uint32_t fallback = GetParam().variant ? std::max(3u, IDEM_PATH_TRACES / 4u) : IDEM_PATH_TRACES;
  const std::uint32_t first = env_number("IDEM_SEED", 1), traces = env_number("IDEM_TRACES", fallback);
  int failing = 0, ran = 0;
  for (Mode mode : kModes) {
    if (!mode_runs_on(mode, caps(), store().capabilities())) continue;
    std::map<std::string, int> reasons;  // of process()'s decisions over the mode's traces
    for (std::uint32_t seed = first; seed < first + traces && failing < 3; ++seed) {
      ++ran;
      const int failed_before = failures();
      const Trace trace = make_trace(seed * 7919 + static_cast<std::uint32_t>(mode), mode);
      SCOPED_TRACE("IDEM_SEED=" + std::to_string(seed) + " IDEM_TRACES=1 reproduces this trace (mode " +
                   mode_name(mode) + ")");
      const Outcome want = PathRun(GetParam(), mode, trace).run(Path::kProcess);
      ASSERT_EQ(want.decisions.size(), trace.deliveries.size());
      ASSERT_FALSE(want.contexts.empty());
      for (const auto& [seq, d] : want.decisions) ++reasons[std::string(reason_name(d.reason))];
      for (Path path : kPaths) {
        if (path == Path::kProcess) continue;
        const int path_failed_before = failures();
        // Behind the entity gates process_batch answers as process() over its own order.
        const Outcome batch_want = path == Path::kBatch && gated(mode)
                                       ? PathRun(GetParam(), mode, batch_order(trace, mode)).run(Path::kProcess)
                                       : Outcome{};
        expect_same(path == Path::kBatch && gated(mode) ? batch_want : want,
                    PathRun(GetParam(), mode, trace).run(path), mode, path);
        if (failures() > path_failed_before) ADD_FAILURE() << show(trace);
      }
      if (failures() > failed_before) ++failing;  // three failing traces are enough to read
    }
    // The premise: the traces met work done, failures and copies (one trace alone may
    // not: under strict ordering every key's first version can fail).
    SCOPED_TRACE(mode_name(mode));
    EXPECT_GT(reasons["processed"], 0);
    if (mode != Mode::kAtLeastOnce) {
      EXPECT_GT(reasons["duplicate"] + reasons["stale"], 0) << "no copy was answered";
    }
    EXPECT_GE(reasons.size(), 3u) << "the traces should meet failures and copies";
  }
  std::printf("path equivalence: %d traces from seed %u, %d failing\n", ran, first, failing);
}

}  // namespace
}  // namespace idem::conformance
