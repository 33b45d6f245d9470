// The pieces of one handler call, shared by the step that runs it (claimed_step.hpp),
// the pipeline and the entity gates: the subject, the gate's verdict, the run's
// outcome, and the one place that sets HandlerContext's private fields. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/decision.hpp"
#include "idem/detail/engine.hpp"
#include "idem/guarantee.hpp"
#include "idem/handler.hpp"
#include "idem/message.hpp"
#include "idem/outbox.hpp"
#include "idem/store.hpp"

namespace idem::detail {

// The outcome of running the handler once.
struct Run {
  HandlerResult::Kind kind = HandlerResult::Kind::kOk;
  std::optional<std::string> result;
  std::string error;
  Duration delay{0};
  Reason failure_reason = Reason::kHandlerFailed;
  bool unacknowledged = false;  // manual: neither ack nor nack
};

// What the entity gates decided for a message that may run: the entity write its
// commit carries.
struct Gate {
  std::string_view key;
  std::uint64_t revision = 0;            // the entity revision read with the claim
  std::optional<std::uint64_t> version;  // the version to apply (ordering)
  std::string_view event, from, to;      // the transition (state machine)
  bool drained = false;                  // the message comes from the reorder buffer
  std::string_view message;              // drained: the encoded message, its dead letter's body
  // Set by the step whose commit carrying `version` landed (a processed message, or a
  // dead-lettered one that uses up its version under strict ordering): the key's
  // successors may be next.
  bool advanced = false;
};

// The message a handler call runs on, as the extractors found it (or as the reorder
// buffer kept it).
struct Subject {
  std::string_view id;
  std::optional<std::uint64_t> fingerprint;
  std::string_view key;                  // empty: none extracted
  std::optional<std::uint64_t> version;  // none extracted
};

inline Subject subject_of(const MessageView& m, std::optional<std::uint64_t> fp) {
  return {m.id.value_or(""), fp, m.key.value_or(""), m.version};
}

// HandlerContext's private fields are set and read here only.
struct ContextAccess {
  using Manual = HandlerContext::Manual;
  // The context of every handler call (claimed_step.hpp): the subject's key and version
  // whenever they were extracted; event, transition and drained from the gate.
  static void init(HandlerContext& ctx, Engine* e, const Subject& s, std::uint32_t attempt, Guarantee g,
                   TimePoint lease_until, const Gate* gate) {
    if (gate != nullptr) {
      ctx.event_ = gate->event;
      ctx.from_ = gate->from;
      ctx.to_ = gate->to;
      ctx.drained_ = gate->drained;
    }
    ctx.engine_ = e;
    ctx.id_ = s.id;
    ctx.key_ = s.key;
    ctx.version_ = s.version.value_or(0);
    ctx.attempt_ = attempt;
    ctx.guarantee_ = g;
    ctx.lease_until_ = lease_until;
  }
  static void set_transaction(HandlerContext& ctx, StoreTransaction* txn) { ctx.transaction_ = txn; }
  static Manual manual(const HandlerContext& ctx) { return ctx.manual_; }
  // Moves r's result and error into run (r is left without them).
  static void take(HandlerResult& r, Run& run) {
    run.kind = r.kind_;
    run.result = std::move(r.result_);
    run.error = std::move(r.error_);
    run.delay = r.delay_;
  }
  static void set_outbox(HandlerContext& ctx, std::vector<OutboxEntry>* out) { ctx.outbox_ = out; }
  static const std::string& publish_error(const HandlerContext& ctx) { return ctx.publish_error_; }
  static Duration nack_delay(const HandlerContext& ctx) { return ctx.nack_delay_; }
};

}  // namespace idem::detail
