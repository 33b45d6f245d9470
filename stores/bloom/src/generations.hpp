// A time-windowed set of libbloom filters (see bloom_store.hpp). Not thread-safe:
// callers hold their own lock.
#pragma once

#include <bloom.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "idem/bloom_store.hpp"
#include "probe.hpp"

namespace idem::bloom::detail {

// When a filter may be dropped.
enum class DropRule {
  kWindow,      // standalone: its newest id is older than the window
  kAllExpired,  // front filter: every record added to it has expired
};

class Generations {
 public:
  // REQUIRES: check_options(o) is OK.
  Generations(const Options& o, DropRule rule);
  ~Generations();
  Generations(const Generations&) = delete;
  Generations& operator=(const Generations&) = delete;

  // Returns kInvalidArgument naming the option that cannot be met.
  static Status check_options(const Options& o);

  // True if some live filter may hold id at `now`.
  bool maybe_contains(std::string_view id, std::int64_t now_ms) { return maybe_contains(probe_of(id), now_ms); }
  // The same for the id whose probe_of() is p (computed by the caller, e.g. outside
  // its lock, or once for a lookup and the add that follows).
  bool maybe_contains(Probe p, std::int64_t now_ms);
  // Adds id at `now`; its record expires at expires_ms (kAllExpired only).
  void add(std::string_view id, std::int64_t now_ms, std::int64_t expires_ms) { add(probe_of(id), now_ms, expires_ms); }
  void add(Probe p, std::int64_t now_ms, std::int64_t expires_ms);
  // Hints for batches (a lookup or add a few ids ahead, so that their cache misses
  // overlap): load the bits maybe_contains(p, now) tests first in every live filter,
  // or the bits add(p, …) sets in the newest filter. Change nothing.
  void prefetch_lookup(Probe p, std::int64_t now_ms) const;
  void prefetch_add(Probe p) const;
  // Adds an id found in the durable store before any `now` is known.
  void add_warm(std::string_view id, std::int64_t expires_ms);

  // kAllExpired: true iff every id dropped so far has expired at now (so a negative
  // answer means "no live record").
  bool vouches(std::int64_t now_ms) const { return dropped_max_expiry_ms_ <= now_ms; }

  Stats stats() const;
  // Estimated time until which a present id is remembered (inspect()).
  std::int64_t remembered_until(std::string_view id, std::int64_t now_ms);

  // Serialises the filters with the options they were made for.
  std::string serialize() const;
  // Replaces the filters with those of a serialize() output. Errors: kDataLoss
  // (truncated, corrupt, foreign), kFailedPrecondition (other options).
  Status restore(std::string_view bytes);

 private:
  struct Gen {
    struct bloom filter {};
    std::int64_t start_ms = 0;
    std::int64_t last_ms = 0;
    std::int64_t max_expiry_ms = 0;
    std::uint64_t count = 0;
  };

  bool live(const Gen& g, std::int64_t now_ms) const;
  void drop_expired(std::int64_t now_ms);
  void drop_oldest(bool early);
  Gen& newest_for(std::int64_t now_ms);
  std::unique_ptr<Gen> make_gen(std::int64_t now_ms) const;

  Options o_;
  DropRule rule_;
  std::uint64_t per_gen_;                  // ids per filter
  double per_gen_fp_;                      // false-positive rate per filter
  Geometry geometry_;                      // of every filter (bloom_init(per_gen_, per_gen_fp_))
  std::int64_t slice_ms_;                  // window / generations
  std::deque<std::unique_ptr<Gen>> gens_;  // oldest first
  std::int64_t dropped_max_expiry_ms_ = INT64_MIN;
  std::uint64_t early_drops_ = 0;
};

}  // namespace idem::bloom::detail
