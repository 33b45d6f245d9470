// The Redis Cluster routing layer: slot map from CLUSTER SLOTS, MOVED → refresh and
// retry, ASK → ASKING then retry at the named node, TRYAGAIN / CLUSTERDOWN / a node
// that cannot be reached → bounded retries with a slot-map refresh in between, then
// kUnavailable. A command whose connection broke after it was sent is never retried
// (it may have run): it is kUnavailable.
#pragma once

#include <memory>

#include "executor.hpp"

namespace idem::redis::detail {

// Connects to a seed and reads the slot map. kUnavailable if no seed answers.
StatusOr<std::unique_ptr<Executor>> make_cluster_executor(const Options& o, const ConnectOptions& co);

// "MOVED 3999 127.0.0.1:6381" / "ASK …": the slot and the node. An empty host means
// `from`. Returns nullopt for another shape.
struct Redirect {
  int slot = 0;
  Endpoint to;
};
std::optional<Redirect> parse_redirect(const std::string& error, const Endpoint& from);

}  // namespace idem::redis::detail
