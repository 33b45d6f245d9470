#include "cluster/slot_map.hpp"

#include <algorithm>

namespace idem::redis::detail {
namespace {

StatusOr<Endpoint> node_of(const Reply& r, const Endpoint& asked) {
  if (r.type != Reply::Type::kArray || r.elements.size() < 2 || r.elements[0].type != Reply::Type::kString ||
      r.elements[1].type != Reply::Type::kInteger || r.elements[1].integer <= 0 || r.elements[1].integer > 65535)
    return internal_error("redis: CLUSTER SLOTS names a node in an unexpected shape");
  Endpoint e;
  e.host = r.elements[0].str;
  if (e.host.empty() || e.host == "?") e.host = asked.host;
  e.port = static_cast<std::uint16_t>(r.elements[1].integer);
  return e;
}

}  // namespace

StatusOr<SlotMap> SlotMap::parse(const Reply& reply, const Endpoint& asked) {
  if (reply.type != Reply::Type::kArray) return internal_error("redis: CLUSTER SLOTS did not answer an array");
  SlotMap m;
  m.master_.fill(kNone);
  auto index_of = [&m](const Endpoint& e) {
    for (std::size_t i = 0; i < m.nodes_.size(); ++i)
      if (m.nodes_[i].host == e.host && m.nodes_[i].port == e.port) return i;
    m.nodes_.push_back(e);
    return m.nodes_.size() - 1;
  };
  std::vector<Endpoint> replicas;
  for (const Reply& range : reply.elements) {
    if (range.type != Reply::Type::kArray || range.elements.size() < 3 ||
        range.elements[0].type != Reply::Type::kInteger || range.elements[1].type != Reply::Type::kInteger)
      return internal_error("redis: CLUSTER SLOTS has a range in an unexpected shape");
    const std::int64_t lo = range.elements[0].integer;
    const std::int64_t hi = range.elements[1].integer;
    if (lo < 0 || hi >= kSlotCount || lo > hi) return internal_error("redis: CLUSTER SLOTS has a bad slot range");
    auto master = node_of(range.elements[2], asked);
    if (!master.ok()) return master.status();
    const auto idx = static_cast<std::uint16_t>(index_of(*master));
    for (std::int64_t s = lo; s <= hi; ++s) m.master_[static_cast<std::size_t>(s)] = idx;
    for (std::size_t i = 3; i < range.elements.size(); ++i) {
      auto rep = node_of(range.elements[i], asked);
      if (rep.ok()) replicas.push_back(*rep);
    }
  }
  for (const Endpoint& r : replicas) index_of(r);
  return m;
}

std::optional<Endpoint> SlotMap::master_of(int slot) const {
  const std::uint16_t i = master_[static_cast<std::size_t>(slot)];
  if (i == kNone) return std::nullopt;
  return nodes_[i];
}

int SlotMap::covered() const {
  return static_cast<int>(std::count_if(master_.begin(), master_.end(), [](std::uint16_t i) { return i != kNone; }));
}

}  // namespace idem::redis::detail
