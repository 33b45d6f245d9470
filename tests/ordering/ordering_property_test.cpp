// Property test of version ordering (docs/design.md §5) through every store:
// random permutations of versions 1..N (N in 2..12) for many keys, delivered with
// random duplicates, redeliveries of messages whose decision was retry (later in the
// stream, as a broker does), random handler failures, random process_batch calls and,
// on durable stores, crashes at random points (the consumer and the store handle are
// destroyed, the store is reopened, a new consumer calls tick()).
//
//  strict:    the handler sees each key's versions exactly once, in order 1,2,…,N;
//             every message ends processed (by its delivery or, drained from the
//             reorder buffer, as told to on_buffered); the buffer ends empty and each
//             key's applied version is N.
//  monotonic: the versions the handler sees per key strictly increase, N is applied,
//             every message ends processed or stale; nothing is buffered.
//
// Time is a ManualClock. The seed is printed on failure; reproduce with
//   IDEM_PROPERTY_SEED=<seed> ./ordering_property_test
// and scale the number of rounds with IDEM_PROPERTY_SCALE (default 1) for long runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "support/store_uri.hpp"

namespace idem {
namespace {

// ---- the message and its codec ------------------------------------------------------

struct OMsg {
  std::string id;
  std::string key;
  std::uint64_t version = 0;
};

// "<version> <key bytes> <key><id>": keys and ids are arbitrary bytes.
std::string encode(const OMsg& m) {
  return std::to_string(m.version) + ' ' + std::to_string(m.key.size()) + ' ' + m.key + m.id;
}

std::optional<std::uint64_t> read_number(std::string_view& s) {
  const auto space = s.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + space, n);
  if (ec != std::errc() || p != s.data() + space) return std::nullopt;
  s.remove_prefix(space + 1);
  return n;
}

std::optional<OMsg> decode(std::string_view s) {
  OMsg m;
  const auto version = read_number(s);
  const auto key_size = read_number(s);
  if (!version || !key_size || *key_size > s.size()) return std::nullopt;
  m.version = *version;
  m.key = std::string(s.substr(0, *key_size));
  m.id = std::string(s.substr(*key_size));
  return m;
}

Extractors<OMsg> extractors() {
  Extractors<OMsg> x;
  x.id = [](const OMsg& m) { return std::optional<std::string_view>(m.id); };
  x.key = [](const OMsg& m) { return std::optional<std::string_view>(m.key); };
  x.version = [](const OMsg& m) { return std::optional<std::uint64_t>(m.version); };
  x.encode = encode;
  x.decode = decode;
  return x;
}

TEST(OrderingPropertyCodec, DecodeInvertsEncode) {
  const OMsg m{std::string("i\0d\xff", 4), std::string("k ey\0", 5), 12};
  const auto back = decode(encode(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, m.id);
  EXPECT_EQ(back->key, m.key);
  EXPECT_EQ(back->version, 12u);
  EXPECT_FALSE(decode("12 99 short").has_value());
  EXPECT_FALSE(decode("x 1 k").has_value());
}

// ---- seeds --------------------------------------------------------------------------

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t base_seed() {
  if (const char* s = std::getenv("IDEM_PROPERTY_SEED")) return std::strtoull(s, nullptr, 0);
  return 20261129;
}

double scale() {
  if (const char* s = std::getenv("IDEM_PROPERTY_SCALE")) {
    const double v = std::strtod(s, nullptr);
    if (v > 0) return v;
  }
  return 1.0;
}

std::uint64_t name_hash(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// ---- the store under test: a fresh one per round, reopened on every crash ---------------

// A durable store lives under /dev/shm when there is one: the crashes simulated here
// are process crashes (the handle is dropped), which tmpfs survives like a disk, and
// reopening a store there costs no fsync.
class StoreHandle {
 public:
  // scheme: "memory", "sqlite" or "rocksdb"; round: names the directory.
  StoreHandle(const std::string& scheme, int round) : scheme_(scheme) {
    if (!durable() || scheme == "postgres") {
      uri_ = test_support::store_uri(scheme, "");
      return;
    }
    std::error_code ec;
    std::filesystem::path base = "/dev/shm";
    if (!std::filesystem::is_directory(base, ec) || ::access(base.c_str(), W_OK) != 0)
      base = std::filesystem::temp_directory_path();
    dir_ = base / ("idem-ordering-" + scheme + "-" + std::to_string(::getpid()) + "-" + std::to_string(round));
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::create_directories(dir_);
    uri_ = scheme + ":" + (dir_ / "store").string();
  }
  ~StoreHandle() {
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

  bool durable() const { return scheme_ != "memory"; }
  const std::string& uri() const { return uri_; }

  // Returns the open store (opening it if it is closed).
  std::shared_ptr<Store> get() {
    if (!store_) {
      auto s = open_store(uri_);
      if (!s.ok()) {
        ADD_FAILURE() << "open_store(" << uri_ << "): " << s.status().to_string();
        return nullptr;
      }
      store_ = std::move(s).value();
    }
    return store_;
  }
  // Drops this handle's reference (the store closes once the consumer's is gone too).
  void close() { store_.reset(); }

 private:
  std::string scheme_;
  std::filesystem::path dir_;
  std::string uri_;
  std::shared_ptr<Store> store_;
};

// ---- one round: K keys, one stream, driven until everything is decided -----------------

struct Delivery {
  OMsg msg;
  TimePoint not_before{};  // a retried message is redelivered no sooner
};

class Round {
 public:
  Round(std::uint64_t seed, Ordering mode, StoreHandle& store, int keys, std::string prefix)
      : rng_(seed), mode_(mode), store_(store), durable_(store.durable()), prefix_(std::move(prefix)) {
    p_dup_ = real(0.0, 0.3);
    p_fail_ = real(0.0, 0.3);
    p_crash_ = durable_ ? real(0.0, 0.03) : 0.0;
    max_crashes_ = durable_ ? uniform(1, 4) : 0;
    p_batch_ = real(0.0, 0.2);
    p_tick_ = real(0.0, 0.1);
    const int choice = uniform(0, 2);
    drain_per_call_ = choice == 0 ? 1 : choice == 1 ? 2 : 1000;
    for (int k = 0; k < keys; ++k) n_.push_back(static_cast<std::uint64_t>(uniform(2, 12)));
  }

  // Runs the round; returns the violations found (empty: the properties hold).
  std::vector<std::string> run() {
    build_stream();
    open_consumer();
    while (!queue_.empty() && ok()) deliver_next();
    settle();
    if (ok()) check_final();
    return violations_;
  }

  // The events of the keys that the violations name, in order.
  std::string history() const {
    std::set<std::string> keys;
    for (const auto& v : violations_) {
      const auto slash = v.find("/k");
      if (slash == std::string::npos) continue;
      const auto space = v.rfind(' ', slash);
      const auto begin = space == std::string::npos ? 0 : space + 1;
      const auto end = v.find_first_of("/ :", slash + 2);
      keys.insert(v.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    }
    std::string out, previous;
    int repeats = 0;
    auto flush = [&] {
      if (repeats > 0) out += " (x" + std::to_string(repeats + 1) + ")";
      repeats = 0;
    };
    for (const auto& [key, what] : events_) {
      bool mine = key.empty();
      for (const auto& k : keys) mine = mine || key == k || key.rfind(k + "/", 0) == 0;
      if (!mine) continue;
      std::string line = (key.empty() ? std::string("*") : key) + ": " + what;
      if (line == previous) {
        ++repeats;
        continue;
      }
      flush();
      out += "\n    " + line;
      previous = std::move(line);
    }
    flush();
    return out;
  }

  std::string describe() const {
    std::ostringstream os;
    os << "keys=" << n_.size() << " p_dup=" << p_dup_ << " p_fail=" << p_fail_ << " p_crash=" << p_crash_
       << " p_batch=" << p_batch_ << " drain_per_call=" << drain_per_call_ << " deliveries=" << deliveries_
       << " crashes=" << crashes_ << "/" << max_crashes_ << " retries=" << retries_ << " drained=" << drained_ok_;
    return os.str();
  }
  int crashes() const { return crashes_; }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }
  bool ok() const { return violations_.empty(); }
  // Reopening a store is the slow part (RocksDB most): a round crashes a few times.
  bool can_crash() const { return durable_ && crashes_ < max_crashes_; }

  void violation(std::string what) {
    if (violations_.size() < 20) violations_.push_back(std::move(what));
  }

  // The round's history, for the failure message: (key or "" for all keys, event).
  void event(std::string_view key, std::string what) { events_.emplace_back(std::string(key), std::move(what)); }
  static std::string decision_text(const Decision& d) {
    return std::string(action_name(d.action)) + "/" + std::string(reason_name(d.reason)) +
           (d.detail.empty() ? "" : " (" + d.detail + ")");
  }

  std::string key_of(std::size_t k) const { return prefix_ + "k" + std::to_string(k); }
  static std::string id_of(const std::string& key, std::uint64_t v) { return key + "/v" + std::to_string(v); }

  // Each key's versions in a random order, keys interleaved at random, and duplicates
  // of random messages at random later positions.
  void build_stream() {
    std::vector<std::vector<std::uint64_t>> perms(n_.size());
    std::vector<std::size_t> slots;
    for (std::size_t k = 0; k < n_.size(); ++k) {
      for (std::uint64_t v = 1; v <= n_[k]; ++v) {
        perms[k].push_back(v);
        slots.push_back(k);
        ids_.insert(id_of(key_of(k), v));
      }
      std::shuffle(perms[k].begin(), perms[k].end(), rng_);
      std::reverse(perms[k].begin(), perms[k].end());  // popped from the back below
    }
    std::shuffle(slots.begin(), slots.end(), rng_);
    std::vector<Delivery> stream;
    for (std::size_t k : slots) {
      OMsg m;
      m.key = key_of(k);
      m.version = perms[k].back();
      perms[k].pop_back();
      m.id = id_of(m.key, m.version);
      stream.push_back({m, {}});
    }
    const std::size_t originals = stream.size();
    for (std::size_t i = 0; i < originals; ++i) {
      if (!chance(p_dup_)) continue;
      const auto at = static_cast<std::size_t>(uniform(static_cast<int>(i) + 1, static_cast<int>(stream.size())));
      stream.insert(stream.begin() + static_cast<std::ptrdiff_t>(at), stream[i]);
    }
    queue_.assign(stream.begin(), stream.end());
  }

  void open_consumer() {
    ConsumerOptions o;
    o.store = store_.get();
    if (!o.store) {
      violation("the store did not open");
      return;
    }
    o.clock = clock_;
    o.max_retries = 100'000;  // nothing dead-letters for retries
    o.backoff = Backoff{Duration{10}, 2.0, Duration{80}};
    o.ordering.mode = mode_;
    o.ordering.gap_timeout = Duration{3'600'000};  // hold; never reached here
    o.ordering.drain_per_call = drain_per_call_;
    o.on_buffered = [this](const BufferedOutcome& b) { on_buffered(b); };
    auto c = Consumer<OMsg>::create(std::move(o), extractors(),
                                    [this](const OMsg& m, HandlerContext& ctx) { return handle(m, ctx); });
    if (!c.ok()) {
      violation("Consumer::create: " + c.status().to_string());
      return;
    }
    consumer_.emplace(std::move(c).value());
  }

  // Destroys the consumer and the store handle, reopens both, runs the start-up tick.
  void crash() {
    ++crashes_;
    event("", "crash, reopen, tick()");
    consumer_.reset();
    store_.close();
    open_consumer();
    if (consumer_) consumer_->tick();
  }

  void deliver_next() {
    if (!consumer_) return;
    std::size_t take = 1;
    if (queue_.size() >= 2 && chance(p_batch_))
      take = static_cast<std::size_t>(uniform(2, std::min<int>(12, static_cast<int>(queue_.size()))));
    std::vector<Delivery> batch(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(take));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(take));
    for (const Delivery& d : batch)
      if (clock_->now() < d.not_before) clock_->set(d.not_before);
    clock_->advance(std::chrono::milliseconds(uniform(0, 3)));

    std::vector<OMsg> msgs;
    for (const Delivery& d : batch) {
      msgs.push_back(d.msg);
      delivering_.insert(d.msg.id);
    }
    deliveries_ += msgs.size();
    std::vector<Decision> ds;
    if (msgs.size() == 1)
      ds.push_back(consumer_->process(msgs[0]));
    else
      ds = consumer_->process_batch(msgs);
    delivering_.clear();
    if (ds.size() != msgs.size()) {
      violation("process_batch returned " + std::to_string(ds.size()) + " decisions for " +
                std::to_string(msgs.size()) + " messages");
      return;
    }
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      event(msgs[i].key, "delivered v" + std::to_string(msgs[i].version) + (msgs.size() > 1 ? " (batch)" : "") +
                             " -> " + decision_text(ds[i]));
      on_decision(msgs[i], ds[i]);
    }

    if (can_crash() && (crash_soon_ || chance(p_crash_))) {
      crash_soon_ = false;
      crash();
    } else if (chance(p_tick_)) {
      event("", "tick()");
      consumer_->tick();
    }
  }

  // After the stream: let backoffs pass and tick until every message is decided.
  void settle() {
    for (int i = 0; i < 2000 && ok() && consumer_ && !all_done(); ++i) {
      clock_->advance(std::chrono::milliseconds(81));
      if (can_crash() && chance(p_crash_)) crash();
      if (consumer_) {
        event("", "settle: +81 ms, tick()");
        consumer_->tick();
      }
    }
  }

  bool all_done() const {
    if (mode_ == Ordering::kStrict) return processed_.size() == ids_.size();
    return processed_.size() + stale_.size() == ids_.size();
  }

  HandlerResult handle(const OMsg& m, HandlerContext& ctx) {
    if (ctx.key() != m.key) violation("ctx.key() \"" + std::string(ctx.key()) + "\" for a message of key " + m.key);
    if (ctx.version() != m.version) violation("ctx.version() " + std::to_string(ctx.version()) + " for " + m.id);
    if (ctx.id() != m.id) violation("ctx.id() \"" + std::string(ctx.id()) + "\" for " + m.id);
    if (!delivering_.contains(m.id) && !ctx.drained())
      violation("the handler ran for " + m.id + ", which is neither being delivered nor drained");
    if (mode_ != Ordering::kStrict && ctx.drained()) violation("drained() under monotonic ordering for " + m.id);
    if (chance(p_fail_)) {
      if (ctx.drained() && chance(0.25)) crash_soon_ = true;  // crash in the middle of a drain
      event(m.key, "handler v" + std::to_string(m.version) + (ctx.drained() ? " drained" : "") + " fails");
      return HandlerResult::fail("injected failure");
    }
    event(m.key, "handler v" + std::to_string(m.version) + (ctx.drained() ? " drained" : "") + " ok");
    seen_[m.key].push_back(m.version);
    if (ctx.drained()) ++drained_ok_;
    return HandlerResult::ok();
  }

  void mark_processed(const std::string& id, std::string_view how) {
    if (!ids_.contains(id)) violation(std::string(how) + " processed an unknown id " + id);
    if (!processed_.insert(id).second) violation(id + " processed twice (the second time " + std::string(how) + ")");
  }

  void on_decision(const OMsg& m, const Decision& d) {
    auto bad = [&] {
      violation(m.id + ": unexpected decision " + std::string(action_name(d.action)) + "/" +
                std::string(reason_name(d.reason)) + (d.detail.empty() ? "" : " (" + d.detail + ")"));
    };
    switch (d.action) {
      case Action::kAck:
        switch (d.reason) {
          case Reason::kProcessed:
            mark_processed(m.id, "by its delivery");
            break;
          case Reason::kDuplicate:
            if (!processed_.contains(m.id)) violation(m.id + ": ack/duplicate but it was never processed");
            break;
          case Reason::kStale:
            if (mode_ == Ordering::kStrict && !processed_.contains(m.id))
              violation(m.id + ": ack/stale under strict ordering but it was never processed");
            if (mode_ == Ordering::kMonotonic && !processed_.contains(m.id)) stale_.insert(m.id);
            break;
          case Reason::kBuffered:
            if (mode_ != Ordering::kStrict || !durable_) bad();
            break;
          default:
            bad();
        }
        break;
      case Action::kHold:
        if (mode_ != Ordering::kStrict || durable_ || d.reason != Reason::kBuffered) bad();
        held_.insert(m.id);
        break;
      case Action::kRetry: {
        ++retries_;
        Delivery again{m, clock_->now() + d.delay};
        const auto at =
            static_cast<std::size_t>(uniform(0, static_cast<int>(std::min<std::size_t>(queue_.size(), 30))));
        queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(at), again);
        break;
      }
      case Action::kDeadLetter:
        bad();
        break;
    }
  }

  void on_buffered(const BufferedOutcome& b) {
    if (mode_ != Ordering::kStrict) violation("on_buffered under monotonic ordering for " + b.id);
    const Decision& d = b.decision;
    event(b.key, "on_buffered v" + std::to_string(b.version) + " -> " + decision_text(d));
    if (d.action == Action::kAck) released_.insert(b.id);
    if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
      ++buffered_processed_;
      mark_processed(b.id, "drained from the buffer");
      return;
    }
    if (d.action == Action::kRetry) return;  // the entry stays; a later drain runs it
    if (d.action == Action::kAck && (d.reason == Reason::kStale || d.reason == Reason::kDuplicate)) {
      // Its version was applied by another delivery of the same id, whose decision may
      // come back only after this report (the drain runs inside that process() call).
      left_unprocessed_.emplace(b.id, std::string(reason_name(d.reason)));
      return;
    }
    violation(b.id + ": buffered message left with " + std::string(action_name(d.action)) + "/" +
              std::string(reason_name(d.reason)) + (d.detail.empty() ? "" : " (" + d.detail + ")"));
  }

  static std::string list(const std::vector<std::uint64_t>& vs) {
    std::string s;
    for (std::size_t i = 0; i < vs.size() && i < 40; ++i) s += (s.empty() ? "" : ",") + std::to_string(vs[i]);
    if (vs.size() > 40) s += ",… (" + std::to_string(vs.size()) + " in all)";
    return s;
  }

  void check_final() {
    if (!all_done()) {
      std::string missing;
      int shown = 0;
      for (const auto& id : ids_)
        if (!processed_.contains(id) && !stale_.contains(id) && shown++ < 8) missing += " " + id;
      violation("not every message was decided after the stream and " + std::to_string(2000) +
                " ticks; undecided:" + missing);
    }
    for (std::size_t k = 0; k < n_.size(); ++k) {
      const std::string key = key_of(k);
      const auto& seen = seen_[key];
      if (mode_ == Ordering::kStrict) {
        std::vector<std::uint64_t> want;
        for (std::uint64_t v = 1; v <= n_[k]; ++v) want.push_back(v);
        if (seen != want)
          violation("strict: handler saw key " + key + " as [" + list(seen) + "], want [" + list(want) + "]");
      } else {
        for (std::size_t i = 1; i < seen.size(); ++i)
          if (seen[i] <= seen[i - 1]) {
            violation("monotonic: handler saw key " + key + " as [" + list(seen) + "], not strictly increasing");
            break;
          }
        if (seen.empty() || seen.back() != n_[k])
          violation("monotonic: the highest version " + std::to_string(n_[k]) + " of key " + key +
                    " was not handled last: [" + list(seen) + "]");
      }
      if (!consumer_) continue;
      auto e = consumer_->options().store->entities()->read_entity(key);
      if (!e.ok()) {
        violation("read_entity(" + key + "): " + e.status().to_string());
      } else if (e->version != n_[k]) {
        violation("key " + key + " has applied version " + std::to_string(e->version) + ", want " +
                  std::to_string(n_[k]));
      }
    }
    if (drained_ok_ != buffered_processed_)
      violation("the handler completed " + std::to_string(drained_ok_) + " drained messages but on_buffered was told " +
                std::to_string(buffered_processed_) + " processed");
    for (const auto& [id, why] : left_unprocessed_)
      if (!processed_.contains(id)) violation(id + ": left the buffer as " + why + " but was never processed");
    for (const auto& id : held_)
      if (!released_.contains(id)) violation(id + " was held (buffered, memory store) but on_buffered never acked it");
    if (consumer_) {
      auto s = consumer_->options().store->entities()->buffer_summary(4);
      if (!s.ok()) {
        violation("buffer_summary: " + s.status().to_string());
      } else if (s->count != 0) {
        violation("the reorder buffer is not empty at the end: " + std::to_string(s->count) + " entries, first key " +
                  (s->keys.empty() ? std::string("?") : s->keys.front().key));
      }
    }
  }

  std::mt19937_64 rng_;
  Ordering mode_;
  StoreHandle& store_;
  bool durable_;
  std::string prefix_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::optional<Consumer<OMsg>> consumer_;

  double p_dup_ = 0, p_fail_ = 0, p_crash_ = 0, p_batch_ = 0, p_tick_ = 0;
  std::size_t drain_per_call_ = 1000;
  int max_crashes_ = 0;
  std::vector<std::uint64_t> n_;  // versions per key

  std::deque<Delivery> queue_;
  std::set<std::string> delivering_;  // ids of the process()/process_batch() call running
  bool crash_soon_ = false;

  std::set<std::string> ids_;                               // every message of the round
  std::set<std::string> processed_;                         // processed, by delivery or drain
  std::set<std::string> stale_;                             // monotonic: acked stale before being processed
  std::set<std::string> held_;                              // hold/buffered (non-durable store)
  std::set<std::string> released_;                          // told to on_buffered with action ack
  std::map<std::string, std::string> left_unprocessed_;     // left the buffer as stale/duplicate
  std::map<std::string, std::vector<std::uint64_t>> seen_;  // key → versions handled OK
  std::size_t drained_ok_ = 0, buffered_processed_ = 0;
  std::size_t deliveries_ = 0, retries_ = 0;
  int crashes_ = 0;
  std::vector<std::string> violations_;
  std::vector<std::pair<std::string, std::string>> events_;
};

// ---- the cases ----------------------------------------------------------------------

struct Case {
  const char* scheme;
  Ordering mode;
  int permutations;  // keys (one permutation each) over all rounds, before IDEM_PROPERTY_SCALE
  int keys_per_round;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.scheme) + "_" + std::string(ordering_name(info.param.mode));
}

class OrderingProperty : public ::testing::TestWithParam<Case> {};

TEST_P(OrderingProperty, RandomPermutationsDuplicatesFailuresCrashes) {
  const Case& c = GetParam();
  const std::string name = case_name({c, 0});
  const std::uint64_t seed = base_seed();
  const int target = static_cast<int>(c.permutations * scale());
  const bool durable = std::string_view(c.scheme) != "memory";
  int permutations = 0, rounds = 0, crashes = 0;
  while (permutations < target) {
    const std::uint64_t round_seed = splitmix(seed ^ name_hash(name) ^ splitmix(static_cast<std::uint64_t>(rounds)));
    const int keys = std::min(c.keys_per_round, target - permutations);
    StoreHandle store(c.scheme, rounds);
    Round round(round_seed, c.mode, store, keys, "r" + std::to_string(rounds) + "/");
    SCOPED_TRACE("IDEM_PROPERTY_SEED=" + std::to_string(seed) + " case " + name + " round " + std::to_string(rounds) +
                 " (round seed " + std::to_string(round_seed) + ") store " + store.uri());
    const std::vector<std::string> violations = round.run();
    if (!violations.empty()) {
      std::string all;
      for (const auto& v : violations) all += "\n  " + v;
      FAIL() << violations.size() << " violation(s) in " << round.describe() << ":" << all
             << "\n  history of these keys (* = every key):" << round.history();
    }
    permutations += keys;
    crashes += round.crashes();
    ++rounds;
  }
  EXPECT_GE(permutations, target);
  if (durable) {
    EXPECT_GT(crashes, 0) << "no crash was simulated";
  }
  RecordProperty("permutations", permutations);
  RecordProperty("crashes", crashes);
  std::printf("[ ordering ] %s: %d permutations in %d rounds, %d crashes, seed %llu\n", name.c_str(), permutations,
              rounds, crashes, static_cast<unsigned long long>(seed));
}

// ≥ 10,000 permutations over all stores (4,000 + 3,000 + 3,000 with rocksdb).
const Case kCases[] = {
    {"memory", Ordering::kStrict, 2500, 24},  {"memory", Ordering::kMonotonic, 1500, 24},
#ifdef IDEM_ORDERING_WITH_SQLITE
    {"sqlite", Ordering::kStrict, 2000, 60},  {"sqlite", Ordering::kMonotonic, 1000, 60},
#endif
#ifdef IDEM_ORDERING_WITH_ROCKSDB
    {"rocksdb", Ordering::kStrict, 2000, 60}, {"rocksdb", Ordering::kMonotonic, 1000, 60},
#endif
#ifdef IDEM_TESTS_WITH_POSTGRES
    {"postgres", Ordering::kStrict, 300, 60}, {"postgres", Ordering::kMonotonic, 200, 60},
#endif
};

INSTANTIATE_TEST_SUITE_P(Stores, OrderingProperty, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace idem
