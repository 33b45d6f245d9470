// Processing guarantees (docs/design.md §2).
#pragma once

#include <optional>
#include <string_view>

namespace idem {

enum class Guarantee {
  // The id is marked done before the handler runs; a failure is logged and dropped.
  kAtMostOnce,
  // No dedup record; a failure is retried, so the handler may run more than once.
  kAtLeastOnce,
  // Claim with a lease when the handler starts, commit the record with a TTL on
  // success; release and retry with backoff on failure, capped, then dead-letter.
  kEffectivelyOnce,
  // As kEffectivelyOnce, but the handler acks or nacks itself through its context.
  kManual,
};

std::string_view guarantee_name(Guarantee g);
std::optional<Guarantee> guarantee_from_name(std::string_view name);

// Returns true iff the guarantee keeps a dedup record and so needs a message id.
inline bool needs_dedup(Guarantee g) { return g != Guarantee::kAtLeastOnce; }

}  // namespace idem
