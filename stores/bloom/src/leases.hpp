// Exact in-memory leases and retry counts, in lock stripes by id hash. The Bloom
// store keeps what a filter cannot: who holds a lease, and how often an id failed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

struct Stripe {
  using LeaseMap = std::unordered_map<std::string, Lease, StringHash, std::equal_to<>>;
  static constexpr std::size_t kMaxSpare = 64;

  std::mutex mu;
  // Presence of a lease means: no commit of the id since the claim that made it.
  LeaseMap leases;
  // Nodes of ended leases, reused by the next claims (no allocation per message).
  std::vector<LeaseMap::node_type> spare;
  std::unordered_map<std::string, RetryCount, StringHash, std::equal_to<>> retries;

  // Inserts a lease of id (absent from `leases`), reusing a spare node if any.
  void add_lease(std::string_view id, std::string_view owner, std::int64_t until_ms,
                 std::optional<std::uint64_t> fingerprint) {
    if (spare.empty()) {
      leases.emplace(std::string(id), Lease{std::string(owner), until_ms, fingerprint});
      return;
    }
    LeaseMap::node_type node = std::move(spare.back());
    spare.pop_back();
    node.key().assign(id);
    node.mapped().owner.assign(owner);
    node.mapped().until_ms = until_ms;
    node.mapped().fingerprint = fingerprint;
    leases.insert(std::move(node));
  }

  // Ends the lease at `it`, keeping its node for reuse.
  void end_lease(LeaseMap::iterator it) {
    LeaseMap::node_type node = leases.extract(it);
    if (spare.size() < kMaxSpare) spare.push_back(std::move(node));
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
    for (std::size_t i = 0; i < n; ++i) stripes_.push_back(std::make_unique<Stripe>());
  }
  Stripe& of(std::string_view id) { return *stripes_[StringHash{}(id) % stripes_.size()]; }
  std::vector<std::unique_ptr<Stripe>>& all() { return stripes_; }

 private:
  std::vector<std::unique_ptr<Stripe>> stripes_;
};

}  // namespace idem::bloom::detail
