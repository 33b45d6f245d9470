#include "id_stream.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

namespace idem::bench {

Stream make_stream(const StreamOptions& o) {
  Stream s;
  s.duplicates = static_cast<std::size_t>(static_cast<double>(o.messages) * o.duplicate_share);
  s.unique = o.messages - s.duplicates;
  std::mt19937_64 rng(o.seed);

  // Distinct ids: per shard, sequence numbers 1, 2, …; then shuffled.
  std::vector<std::string> ids;
  ids.reserve(s.unique);
  const std::uint32_t shards = std::max<std::uint32_t>(o.shards, 1);
  for (std::size_t i = 0; i < s.unique; ++i) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "orders-%u-%09zu", static_cast<unsigned>(i % shards), i / shards + 1);
    ids.emplace_back(buf);
  }
  std::shuffle(ids.begin(), ids.end(), rng);

  // Every delivery gets a sort key: first deliveries their index, a re-send a random
  // key after its original's. Sorting by key gives the delivery order.
  std::vector<std::pair<double, std::size_t>> order;  // (key, index into ids)
  order.reserve(o.messages);
  for (std::size_t i = 0; i < s.unique; ++i) order.emplace_back(static_cast<double>(i), i);
  std::vector<std::size_t> originals(s.unique);
  for (std::size_t i = 0; i < s.unique; ++i) originals[i] = i;
  // Choose `duplicates` distinct originals (partial Fisher-Yates).
  for (std::size_t k = 0; k < s.duplicates; ++k) {
    std::uniform_int_distribution<std::size_t> pick(k, s.unique - 1);
    std::swap(originals[k], originals[pick(rng)]);
    const std::size_t first = originals[k];
    std::uniform_real_distribution<double> later(static_cast<double>(first) + 0.5, static_cast<double>(s.unique));
    order.emplace_back(later(rng), first);
  }
  std::sort(order.begin(), order.end());

  s.messages.reserve(o.messages);
  for (const auto& [key, index] : order) s.messages.push_back(Msg{ids[index]});
  return s;
}

}  // namespace idem::bench
