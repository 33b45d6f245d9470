// The entity gates of the pipeline (docs/design.md §5, §6): the checks of key, version
// and event, the watermark filter, version ordering and the state machine's transition
// check for a claimed message. The reorder buffer is reorder_buffer.cpp.
#include <algorithm>
#include <string>

#include "pipeline.hpp"

namespace idem::detail {

std::optional<Decision> Pipeline::validate_entity(const MessageView& m) const {
  const Ordering mode = o_.ordering.mode;
  if (mode == Ordering::kWatermark) {
    if (!m.stream) return bad("message has no stream (required by ordering watermark)");
    if (!m.position) return bad("message has no position (required by ordering watermark)");
    if (m.stream->size() > o_.ordering.max_stream_bytes)
      return bad("message stream of " + std::to_string(m.stream->size()) +
                 " bytes exceeds ordering.max_stream_bytes (" + std::to_string(o_.ordering.max_stream_bytes) + ")");
    return std::nullopt;
  }
  if (!entity_gated(o_)) return std::nullopt;
  if (!m.key) return bad("message has no key (required by ordering and state machines)");
  if (m.key->empty()) return bad("message key is empty");
  if (m.key->size() > o_.ordering.max_key_bytes)
    return bad("message key of " + std::to_string(m.key->size()) + " bytes exceeds ordering.max_key_bytes (" +
               std::to_string(o_.ordering.max_key_bytes) + ")");
  if (mode == Ordering::kMonotonic || mode == Ordering::kStrict) {
    if (!m.version)
      return bad("message has no version (required by ordering " + std::string(ordering_name(mode)) + ")");
    if (*m.version == 0) return bad("version 0 is not a version (versions start at 1)");
  }
  if (o_.machine) {
    if (!m.event) return bad("message has no event (required by the state machine)");
    if (m.event->empty()) return bad("message event is empty");
  }
  return std::nullopt;
}

std::optional<Decision> Pipeline::watermark_filter(const MessageView& m) const {
  if (o_.ordering.mode != Ordering::kWatermark) return std::nullopt;
  const auto mark = impl_.watermarks.get(*m.stream);
  if (!mark || *m.position > *mark) return std::nullopt;
  Decision d = Decision::ack(Reason::kDuplicate);
  d.detail = "position " + std::to_string(*m.position) + " <= watermark " + std::to_string(*mark) + " of its stream";
  return d;
}

std::optional<Decision> Pipeline::gate(const MessageView& m, const ClaimResult& c, std::optional<std::uint64_t> fp,
                                       detail::HandlerThunk h, std::size_t index, Gate& g) {
  g.key = *m.key;
  g.revision = c.entity.revision;
  const Ordering mode = o_.ordering.mode;
  if (mode == Ordering::kMonotonic || mode == Ordering::kStrict) {
    const std::uint64_t v = *m.version;
    const std::uint64_t applied = c.entity.version;
    const bool unstarted = applied == 0;
    std::uint64_t expected = applied + 1;
    if (unstarted && mode == Ordering::kStrict) expected = o_.ordering.first_version.value_or(v);
    const bool stale = mode == Ordering::kMonotonic ? v <= applied : v < expected;
    if (stale) {
      (void)clock_.timed_store([&] { return impl_.store->release(release_req(*m.key, *m.id, false)); });
      Decision d = Decision::ack(Reason::kStale);
      d.detail = "version " + std::to_string(v) +
                 (unstarted ? " is before the first version " + std::to_string(expected)
                            : " <= applied version " + std::to_string(applied));
      return d;
    }
    const std::uint64_t base = mode == Ordering::kStrict ? expected : applied;
    if (o_.ordering.horizon > 0 && v > base && v - base > o_.ordering.horizon) {
      return dead_letter_now(*m.key, *m.id, fp, nullptr, Reason::kTooFarAhead,
                             "version " + std::to_string(v) + " is more than ordering.horizon (" +
                                 std::to_string(o_.ordering.horizon) + ") ahead of version " + std::to_string(base));
    }
    if (mode == Ordering::kStrict && v > expected) return buffer_early(m, fp, h, index, expected);
    g.version = v;
  }
  if (o_.machine) {
    const StateGate::Check chk = o_.machine->check(c.entity.state, *m.event);
    g.event = *m.event;
    g.from = chk.from;
    switch (chk.answer) {
      case StateGate::Answer::kApply:
        g.to = chk.to;
        break;
      case StateGate::Answer::kNotYetValid: {
        if (c.retries >= o_.machine->max_retries())
          return dead_letter_now(*m.key, *m.id, fp, &g, Reason::kRetriesExhausted, chk.reason);
        auto r = clock_.timed_store([&] { return impl_.store->release(release_req(*m.key, *m.id, true)); });
        if (!r.ok())
          log_error(impl_.log, "idem: release failed (the lease will expire instead): {}", r.status().to_string());
        Decision d = Decision::retry(Reason::kInvalidTransition, o_.machine->backoff().delay_for(c.retries));
        d.detail = chk.reason;
        return d;
      }
      case StateGate::Answer::kNeverValid:
        return dead_letter_now(*m.key, *m.id, fp, &g, Reason::kInvalidTransition, chk.reason);
      case StateGate::Answer::kRejected:
        return dead_letter_now(*m.key, *m.id, fp, &g, Reason::kBadMessage, chk.reason);
    }
  }
  return std::nullopt;
}

}  // namespace idem::detail
