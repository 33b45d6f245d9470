// bloom: — Bloom-filter dedup with libbloom (idem::bloom), in two roles.
//
// 1. Standalone, probabilistic (URI bloom:[SNAPSHOT]?capacity=N&fp=F&window=W):
//    committed ids go into time-windowed generations of Bloom filters. The window is
//    split into `generations` slices; inserts go to the newest filter; a lookup checks
//    every live filter; a filter is dropped once its newest id is older than the
//    window. A filter also closes early when it holds capacity/generations ids, and at
//    most generations+1 filters exist, so memory is fixed: an id is remembered for the
//    window, or — if more than `capacity` ids arrive within one window — until
//    `capacity` newer ids have been committed after it.
//    The price: claim may answer kCompleted for an id never committed (a false
//    positive: the message would be dropped as a duplicate) with probability about
//    `fp` when the window holds `capacity` ids. capabilities().probabilistic is true
//    and the consumer refuses this store under effectively_once / manual unless
//    ConsumerOptions::allow_probabilistic_store is set.
//    Only membership is remembered for committed ids: no stored result, no payload
//    fingerprint (no kConflict after commit), no dead-letter mark, and a commit's ttl
//    is replaced by the window. Leases and retry counts are exact and kept in memory
//    (not durable). A snapshot file (optional) keeps the filters across restarts.
//
// 2. Front filter of a durable store (bloom+rocksdb:PATH?capacity=…, bloom+sqlite:…):
//    the filter holds every id the durable store has a record of (commits and retry
//    counts are added to it before they are written). A negative answer — "certainly
//    absent" — lets the durable store take the lease without reading; a positive
//    answer always goes to the durable store, so a false positive costs one read and
//    never drops a message. The filter warms from the durable store when it opens
//    (rocksdb: a scan of its records). A generation is dropped when every record in it
//    has expired in the durable store; if the filter is overloaded it stops vouching
//    for absence until the records it had to drop early have expired. Not
//    probabilistic: answers are the durable store's.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "idem/backend/store_wrapper.hpp"
#include "idem/store.hpp"

namespace idem::bloom {

struct Options {
  // Distinct ids per window at which the false-positive rate holds. REQUIRES: > 0.
  std::uint64_t capacity = 1'000'000;
  // Target false-positive rate with `capacity` ids in the window. REQUIRES: 0 < fp < 1.
  // Default 0.001 (0.1%).
  double fp = 0.001;
  // How long a committed id is remembered, in ms. REQUIRES: > 0. Default 24 h.
  Duration window{24LL * 3600 * 1000};
  // Slices of the window, each its own filter (generations + 1 filters at most).
  // REQUIRES: 1..64. Default 4.
  std::uint32_t generations = 4;
  // Snapshot file ("" (default): none). Read at open if it exists, written on
  // snapshot() and when the store is destroyed; replaced atomically (write + fsync +
  // rename). Standalone only.
  std::string snapshot_path{};
};

struct Stats {
  std::size_t filters = 0;           // filters allocated now
  std::size_t filter_bytes = 0;      // their bit arrays, in bytes
  double bits_per_id = 0;            // filter bits per id at capacity (all filters)
  std::uint64_t ids = 0;             // ids added to the live filters
  std::uint64_t early_drops = 0;     // filters dropped before their time (overload)
  std::uint64_t skipped_reads = 0;   // front: claims answered without a durable read
  std::uint64_t durable_claims = 0;  // front: claims passed to the durable store
  bool vouching = false;             // front: negatives skip reads (at the latest `now` seen)
};

// A standalone store from open(): the Store contract, its snapshot and statistics.
class FilterStore : public Store {
 public:
  // Writes the snapshot now. Returns kFailedPrecondition without a snapshot_path,
  // kUnavailable if the file cannot be written (the previous one is then intact).
  virtual Status snapshot() = 0;
  virtual Stats stats() = 0;
};

// A filter in front of a durable store, from open_front(): the durable store's
// contract (it is the base()), a claim that may skip its read, and statistics.
class FrontStore : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  virtual Stats stats() = 0;
};

// Opens a standalone store. Errors: kInvalidArgument naming the option that cannot be
// met (zero capacity, fp outside (0,1), window <= 0, generations outside 1..64, or a
// filter larger than libbloom can address); kDataLoss for a snapshot that is
// truncated, corrupt or not an idem bloom snapshot; kFailedPrecondition for a snapshot
// written with other options; kUnavailable if it cannot be read. The snapshot file is
// never modified by a failed open.
StatusOr<std::shared_ptr<FilterStore>> open(const Options& options);

// From a URI: bloom:[SNAPSHOT]?capacity=N&fp=F&window=W&generations=N, W a number
// with a unit: ms, s, m, h or d (e.g. 24h); a bare number is ms. Every parameter left
// out keeps its Options default. Returns kInvalidArgument for an unknown parameter or
// a bad value, and open()'s errors.
StatusOr<std::shared_ptr<FilterStore>> open(const StoreUri& uri);

// The Options of such a URI, without opening anything: open(uri) is open(parse_uri(uri)).
StatusOr<Options> parse_uri(const StoreUri& uri);

// What a durable store offers its front filter. Every member may be empty.
struct DurableHooks {
  // Takes the lease like Store::claim, given that the id has no record: no read.
  // Empty: the filter cannot save reads. Never called for a claim with an entity_key
  // (its entity record must be read): the filter passes those to Store::claim.
  std::function<StatusOr<ClaimResult>(const ClaimRequest&)> claim_absent;
  // claim_absent for many requests at once (results in request order, a later copy
  // of an id seeing the earlier copy's lease). Empty: claim_batch calls claim_absent
  // per request. Used only together with claim_absent.
  std::function<std::vector<StatusOr<ClaimResult>>(std::span<const ClaimRequest>)> claim_absent_batch;
  // Calls visit(id, expires_at) for every record the durable store holds. Empty: the
  // filter cannot warm, so it never vouches for absence (every claim reads).
  std::function<Status(const std::function<void(std::string_view, TimePoint)>&)> for_each_record;
  // Store::begin with a callback run inside commit() before the write, so that the
  // filter learns the id while the transaction stays the backend's own (its typed
  // accessors, e.g. idem::rocksdb::batch(ctx), keep working). Empty while
  // claim_absent is set: transactions are wrapped and typed accessors see none.
  std::function<StatusOr<std::unique_ptr<StoreTransaction>>(TimePoint, std::function<void(const CommitRequest&)>)>
      begin_observed;
};

// The defaults of a front filter (open_front, bloom+X: URIs): Options{} but window
// 7 days (so a generation is dropped 7 days / generations after its newest id) and fp
// 0.01 (a false positive costs one read of the durable store, never a message).
inline Options front_options() {
  Options o;
  o.window = Duration(7LL * 24 * 3600 * 1000);
  o.fp = 0.01;
  return o;
}

// Puts a filter in front of `durable` and warms it (hooks.for_each_record). Errors:
// kInvalidArgument for a null durable store, a snapshot_path, or an option open()
// refuses; the warming scan's errors. For a RocksDB store, bloom_rocksdb::open_front
// (idem/bloom_rocksdb.hpp) passes every hook.
StatusOr<std::shared_ptr<FrontStore>> open_front(std::shared_ptr<Store> durable, const Options& options,
                                                DurableHooks hooks);


// The URI parameters the filter reads (capacity, fp, window, generations).
Status parse_filter_params(const StoreUri& uri, Options& options);

}  // namespace idem::bloom
