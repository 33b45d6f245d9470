// Exact in-memory leases and retry counts, in stripes by id hash (the unit of
// purge_expired's bounded sweep). The Bloom store keeps what a filter cannot: who
// holds a lease, and how often an id failed. Not thread-safe: the store's lock guards
// every stripe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "probe.hpp"

namespace idem::bloom::detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Lease {
  std::string owner;
  std::int64_t until_ms = 0;
  std::optional<std::uint64_t> fingerprint;
};

struct RetryCount {
  std::uint32_t retries = 0;
  std::int64_t expires_ms = 0;
};

// An id with the hash the lease maps use, taken from its Probe: a call hashes its id
// once (probe_of), for the filters, the stripe and the lease map alike.
struct HashedId {
  std::string_view id;
  std::size_t hash = 0;
};
inline HashedId hashed(std::string_view id, Probe p) {
  return {id, (static_cast<std::size_t>(p.b) << 32) | p.a};
}

struct LeaseKey {
  std::string id;
  std::size_t hash = 0;  // hashed(id, probe_of(id)).hash
};
struct LeaseKeyHash {
  using is_transparent = void;
  std::size_t operator()(const LeaseKey& k) const noexcept { return k.hash; }
  std::size_t operator()(const HashedId& k) const noexcept { return k.hash; }
};
struct LeaseKeyEq {
  using is_transparent = void;
  bool operator()(const LeaseKey& a, const LeaseKey& b) const noexcept { return a.hash == b.hash && a.id == b.id; }
  bool operator()(const HashedId& a, const LeaseKey& b) const noexcept { return a.hash == b.hash && a.id == b.id; }
  bool operator()(const LeaseKey& a, const HashedId& b) const noexcept { return a.hash == b.hash && a.id == b.id; }
};
using LeaseMap = std::unordered_map<LeaseKey, Lease, LeaseKeyHash, LeaseKeyEq>;

// Nodes of ended leases, reused by the next claims of any stripe (no allocation per
// message; the node freed last, still in cache, is taken first).
struct SpareNodes {
  static constexpr std::size_t kMax = 1024;
  std::vector<LeaseMap::node_type> nodes;
};

struct Stripe {
  explicit Stripe(SpareNodes& s) : spare_nodes(s) {}

  // Presence of a lease means: no commit of the id since the claim that made it.
  LeaseMap leases;
  SpareNodes& spare_nodes;  // shared by all stripes
  std::unordered_map<std::string, RetryCount, StringHash, std::equal_to<>> retries;

  // Inserts a lease of id (absent from `leases`), reusing a spare node if any.
  void add_lease(HashedId id, std::string_view owner, std::int64_t until_ms, std::optional<std::uint64_t> fingerprint) {
    auto& spare = spare_nodes.nodes;
    if (spare.empty()) {
      leases.emplace(LeaseKey{std::string(id.id), id.hash}, Lease{std::string(owner), until_ms, fingerprint});
      return;
    }
    LeaseMap::node_type node = std::move(spare.back());
    spare.pop_back();
    node.key().id.assign(id.id);
    node.key().hash = id.hash;
    node.mapped().owner.assign(owner);
    node.mapped().until_ms = until_ms;
    node.mapped().fingerprint = fingerprint;
    leases.insert(std::move(node));
  }

  // Ends the lease at `it`, keeping its node for reuse.
  void end_lease(LeaseMap::iterator it) {
    LeaseMap::node_type node = leases.extract(it);
    if (spare_nodes.nodes.size() < SpareNodes::kMax) spare_nodes.nodes.push_back(std::move(node));
  }

  // The live retry count of id at now (0 if none or expired).
  std::uint32_t retries_of(std::string_view id, std::int64_t now) const {
    auto it = retries.find(id);
    return it != retries.end() && it->second.expires_ms > now ? it->second.retries : 0;
  }
};

class Stripes {
 public:
  explicit Stripes(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) stripes_.push_back(std::make_unique<Stripe>(spare_));
  }
  Stripes(const Stripes&) = delete;  // the stripes refer to spare_
  Stripes& operator=(const Stripes&) = delete;
  // The stripe of the id whose probe is p.
  Stripe& of(Probe p) { return *stripes_[p.a % stripes_.size()]; }
  std::vector<std::unique_ptr<Stripe>>& all() { return stripes_; }

 private:
  SpareNodes spare_;  // before stripes_: they refer to it
  std::vector<std::unique_ptr<Stripe>> stripes_;
};

}  // namespace idem::bloom::detail
