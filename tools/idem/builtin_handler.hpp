// The handler that `idem replay` runs for every delivery (docs/design.md §8).
#pragma once

#include <vector>

#include "idem/handler.hpp"
#include "replay_output.hpp"
#include "trace_line.hpp"

namespace idem::cli {

// The effect of running the built-in handler on m: its fields, and the transition
// the state machine applies, if any.
Effect effect_of(const TraceLine& m, const HandlerContext& ctx);

// Fails (HandlerResult::fail) for a line with "fail": true when it runs for that
// line's own delivery (not when the message is drained from the reorder buffer later),
// and succeeds otherwise. A successful run records the effect it had; the caller
// reports it only once its commit is known to have landed (mark_committed), because a
// handler run whose commit did not land did not happen as far as the consumer is
// concerned. Not thread-safe: replay is sequential.
class BuiltinHandler {
 public:
  HandlerResult operator()(const TraceLine& m, HandlerContext& ctx);

  // The latest run of the buffered message `id` was committed.
  void mark_drained_committed(std::string_view id);
  // The latest run for a line's own delivery was committed.
  void mark_direct_committed();

  // Returns the committed effects recorded since the last call, in the order the
  // handler ran, and forgets every recorded effect.
  std::vector<Effect> take_committed();

 private:
  struct Pending {
    Effect effect;
    bool drained = false;
    bool committed = false;
  };
  std::vector<Pending> pending_;
};

}  // namespace idem::cli
