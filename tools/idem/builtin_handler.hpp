// The handler that `idem replay` runs for every delivery (DESIGN.md §8).
#pragma once

#include <vector>

#include "idem/handler.hpp"
#include "replay_output.hpp"
#include "trace_line.hpp"

namespace idem::cli {

// Fails (HandlerResult::fail) for a line with "fail": true and succeeds otherwise.
// A successful run records the effect it had; the caller reports it only once the
// decision says the effect was committed (reason processed), because a handler run
// whose commit did not land did not happen as far as the consumer is concerned.
// Not thread-safe: replay is sequential.
class BuiltinHandler {
 public:
  HandlerResult operator()(const TraceLine& m, HandlerContext& ctx);

  // Returns the effects recorded since the last call, and forgets them.
  std::vector<Effect> take_effects();

 private:
  std::vector<Effect> pending_;
};

}  // namespace idem::cli
