#include "builtin_handler.hpp"

#include <utility>

namespace idem::cli {

HandlerResult BuiltinHandler::operator()(const TraceLine& m, HandlerContext& ctx) {
  if (m.fail) return HandlerResult::fail("the trace line says \"fail\": true");
  Effect e;
  e.id = m.id;
  pending_.push_back(std::move(e));
  // Under the manual guarantee the handler settles the message itself.
  if (ctx.guarantee() == Guarantee::kManual) ctx.ack();
  return HandlerResult::ok();
}

std::vector<Effect> BuiltinHandler::take_effects() { return std::exchange(pending_, {}); }

}  // namespace idem::cli
