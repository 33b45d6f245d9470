// The deterministic delivery stream every benchmark path consumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace idem::bench {

// One delivery. The benchmark's message type: the id is all the middleware reads.
struct Msg {
  std::string id;
};

struct StreamOptions {
  std::size_t messages = 1'000'000;  // deliveries in the stream; default 1M
  double duplicate_share = 0.10;     // share of deliveries that re-send an earlier id; 10%
  std::uint32_t shards = 16;         // the <shard> part of `orders-<shard>-<9 digits>`; 16
  std::uint64_t seed = 20261129;     // PRNG seed; the same seed gives the same stream
};

struct Stream {
  std::vector<Msg> messages;  // in delivery order
  std::size_t unique = 0;     // distinct ids
  std::size_t duplicates = 0; // messages.size() - unique: deliveries of an id seen before
};

// Returns `options.messages` deliveries: `unique` distinct ids `orders-<s>-<9 digits>`
// in shuffled order (so B-tree inserts land at random places), plus `duplicates`
// re-sends, each of a distinct id and placed at a uniformly random later position
// than its first delivery. Deterministic for a given options.
Stream make_stream(const StreamOptions& options);

}  // namespace idem::bench
