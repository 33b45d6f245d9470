// Which master serves which slot, as read from CLUSTER SLOTS.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "cluster/key_slot.hpp"
#include "idem/redis_store.hpp"
#include "reply.hpp"

namespace idem::redis::detail {

class SlotMap {
 public:
  // Parses a CLUSTER SLOTS reply: [[start, end, [host, port, id?, extra…], replicas…]…].
  // Fields after host and port (node id, Redis 7's hostname metadata) are ignored; an
  // empty or "?" host means the node that answered (`asked`). Returns kInternal for a
  // reply of another shape.
  static StatusOr<SlotMap> parse(const Reply& reply, const Endpoint& asked);

  // The master of `slot`, or nullopt if no node serves it.
  std::optional<Endpoint> master_of(int slot) const;
  // Every node named (masters first, then replicas), without repeats.
  const std::vector<Endpoint>& nodes() const { return nodes_; }
  // How many slots some node serves.
  int covered() const;

 private:
  static constexpr std::uint16_t kNone = 0xffff;
  std::array<std::uint16_t, kSlotCount> master_{};  // index into nodes_, or kNone
  std::vector<Endpoint> nodes_;
};

}  // namespace idem::redis::detail
