// `idem bench`'s rows: each feeds the same stream of deliveries to one way of
// deduplicating them (the raw primitive, the naive approach, idem) and counts what it
// found. Internal to the idem command (bench_command.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../../bench/id_stream.hpp"

namespace idem::cli {

using bench::Msg;

// What a row found: every delivery is exactly one of these.
struct BenchCounts {
  std::uint64_t processed = 0;   // first deliveries, handled once
  std::uint64_t duplicates = 0;  // deliveries of an id seen before
  std::uint64_t other = 0;       // anything else (a failure): must stay 0
};

// One row: `step` takes the next `chunk` deliveries (1 for per-message rows) and the
// delivery after them (null at the end of the stream, for rows that look ahead), and
// adds what it found to the counts. Setup happens before the row is timed (when the row is
// built), teardown when it is destroyed.
struct BenchRow {
  std::string path;       // raw, raw_batch, naive, single, batch, floor, floor_batch
  std::size_t chunk = 1;  // deliveries per step call
  std::function<void(std::span<const Msg>, const Msg* next, BenchCounts&)> step;
  std::shared_ptr<void> keep;  // state the step uses, released after the row ran
};

// Builds one row on demand, right before it runs, so that each row starts fresh.
using RowFactory = std::function<BenchRow()>;

// What the bench needs to know of the run when it builds rows.
struct BenchSetup {
  std::string store_uri;  // the --store URI (for idem rows, and raw rows' location)
  std::size_t batch = 1000;
  std::string nonce;  // a per-run prefix of every id, so an existing store sees only new ids
};

// The q-quantile of `ns` (reordered), in µs; 0 when empty.
double quantile_us(std::vector<std::int64_t>& ns, double q);

// Eight random hex digits: a run's prefix of every id and destination it makes.
std::string random_nonce();

// The raw and naive rows of a store scheme, in display order; empty if the scheme has
// none built in. The idem rows (single, batch) are the same for every store
// (bench_command.cpp).
std::vector<RowFactory> memory_rows(const BenchSetup& s);
std::vector<RowFactory> sqlite_rows(const BenchSetup& s);
std::vector<RowFactory> rocksdb_rows(const BenchSetup& s);
// Also the floor rows; none for a cluster.
std::vector<RowFactory> redis_rows(const BenchSetup& s);

}  // namespace idem::cli
