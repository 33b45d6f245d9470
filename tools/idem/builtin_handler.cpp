#include "builtin_handler.hpp"

#include <utility>

namespace idem::cli {

Effect effect_of(const TraceLine& m, const HandlerContext& ctx) {
  Effect e;
  e.id = m.id;
  e.key = m.key;
  e.version = m.version;
  e.event = m.event;
  if (!ctx.to().empty()) {
    e.from = std::string(ctx.from());
    e.to = std::string(ctx.to());
  }
  return e;
}

HandlerResult BuiltinHandler::operator()(const TraceLine& m, HandlerContext& ctx) {
  if (m.fail && !ctx.drained()) return HandlerResult::fail("the trace line says \"fail\": true");
  Effect e = effect_of(m, ctx);
  pending_.push_back({std::move(e), ctx.drained(), false});
  // Under the manual guarantee the handler settles the message itself.
  if (ctx.guarantee() == Guarantee::kManual) ctx.ack();
  return HandlerResult::ok();
}

void BuiltinHandler::mark_drained_committed(std::string_view id) {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->drained && it->effect.id && *it->effect.id == id) {
      it->committed = true;
      return;
    }
  }
}

void BuiltinHandler::mark_direct_committed() {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (!it->drained) {
      it->committed = true;
      return;
    }
  }
}

std::vector<Effect> BuiltinHandler::take_committed() {
  std::vector<Effect> out;
  for (Pending& p : pending_)
    if (p.committed) out.push_back(std::move(p.effect));
  pending_.clear();
  return out;
}

}  // namespace idem::cli
