// The engine (idem/detail/engine.hpp): its creation, the entry points that start a
// Pipeline per call, and the HandlerContext calls that reach back into it.
#include "idem/detail/engine.hpp"

#include <unistd.h>

#include <random>
#include <string>

#include "pipeline.hpp"
#include "validate_options.hpp"

namespace idem::detail {
namespace {

std::string default_owner() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s-%d-%08x", host, static_cast<int>(getpid()), rd());
  return buf;
}

}  // namespace

Engine::Engine(ConsumerOptions options) : opts_(std::move(options)), impl_(std::make_unique<Impl>()) {}
Engine::~Engine() {
  if (impl_ && impl_->dispatcher) (void)impl_->dispatcher->flush_marks(impl_->now());
}

StatusOr<std::unique_ptr<Engine>> Engine::create(ConsumerOptions options, ExtractorSet extractors) {
  if (Status s = validate_options(options, extractors); !s.ok()) return s;
  if (options.owner.empty()) options.owner = default_owner();
  if (!options.clock) options.clock = system_clock();
  std::unique_ptr<Engine> e(new Engine(std::move(options)));
  e->metrics_ = e->opts_.metrics ? e->opts_.metrics : std::make_shared<Metrics>();
  e->impl_->clock = e->opts_.clock;
  e->impl_->log = e->opts_.logger.get();
  e->impl_->store = e->opts_.store.get();
  e->impl_->time_store =
      e->opts_.latency_metrics && (e->impl_->store == nullptr || !e->impl_->store->capabilities().in_process);
  if (e->opts_.outbox.publishers)
    e->impl_->dispatcher = std::make_unique<Dispatcher>(e->opts_.outbox, e->opts_.ttl, *e->impl_->store, e->impl_->log);
  if (e->opts_.on_store_failure == StoreFailurePolicy::kFailOpen)
    log_warn(e->impl_->log, "idem: fail-open is on: when the store is unavailable handlers run without dedup");
  return e;
}

void Engine::misplaced_manual_call() {
  if (!impl_->warned_manual.exchange(true))
    log_warn(impl_->log, "idem: HandlerContext::ack()/nack() ignored: guarantee is {}, not manual (logged once)",
             guarantee_name(opts_.guarantee));
}

Status Engine::extend_lease(HandlerContext& ctx, Duration lease) {
  if (!needs_dedup(opts_.guarantee) || opts_.guarantee == Guarantee::kAtMostOnce) return ok_status();
  const TimePoint now = impl_->now();
  ExtendRequest req{ctx.id_, opts_.owner, lease, now, std::nullopt};
  if (!ctx.key_.empty() && entity_gated(opts_)) req.entity_key = ctx.key_;
  Status s = impl_->store->extend(req);
  if (s.ok()) ctx.lease_until_ = now + lease;
  return s;
}

std::size_t Engine::tick(detail::HandlerThunk handler) {
  if (impl_->dispatcher) {
    (void)impl_->dispatcher->flush_marks(impl_->now());  // idle: nothing else carries them
    impl_->dispatcher->maybe_resend(impl_->now());
  }
  return Pipeline(*this, opts_, *impl_, *metrics_).run_buffer_timers(handler);
}

void Engine::reset_watermark(std::string_view stream, std::uint64_t position) {
  impl_->watermarks.reset(stream, position);
}

Decision Engine::process(const MessageView& m, detail::HandlerThunk handler, std::size_t index) {
  if (impl_->dispatcher) impl_->dispatcher->maybe_resend(impl_->now());
  if (impl_->lookahead.held()) return process_ahead(m, handler, nullptr, index);  // lookahead.cpp
  return Pipeline(*this, opts_, *impl_, *metrics_).process(m, handler, index);
}

std::vector<Decision> Engine::process_batch(std::span<const MessageView> ms, detail::HandlerThunk handler) {
  if (impl_->dispatcher) impl_->dispatcher->maybe_resend(impl_->now());
  if (impl_->lookahead.held()) (void)flush_lookahead();  // lookahead.cpp
  return Pipeline(*this, opts_, *impl_, *metrics_).process_batch(ms, handler);
}

}  // namespace idem::detail

namespace idem {

Status HandlerContext::extend_lease(Duration lease) {
  if (engine_ == nullptr) return ok_status();
  return engine_->extend_lease(*this, lease);
}

void HandlerContext::ack() {
  if (guarantee_ != Guarantee::kManual) {
    if (engine_ != nullptr) engine_->misplaced_manual_call();
    return;
  }
  manual_ = Manual::kAck;
}

Status HandlerContext::publish(std::string_view destination, std::string payload,
                               std::vector<std::pair<std::string, std::string>> headers) {
  Status s = ok_status();
  if (outbox_ == nullptr) {
    s = failed_precondition(
        "ctx.publish: this consumer has no outbox (set ConsumerOptions::outbox.publishers, with transactional mode "
        "and a store that keeps one)");
  } else if (destination.empty()) {
    s = invalid_argument("ctx.publish: empty destination");
  }
  if (!s.ok()) {
    if (publish_error_.empty()) publish_error_ = s.to_string();
    return s;
  }
  OutboxEntry e;
  e.incoming_id = std::string(id_);
  e.position = static_cast<std::uint32_t>(outbox_->size());
  e.destination = std::string(destination);
  e.message.id = outgoing_id(id_, e.position);
  e.message.body = std::move(payload);
  e.message.headers = std::move(headers);
  outbox_->push_back(std::move(e));
  return ok_status();
}

void HandlerContext::nack(Duration delay) {
  if (guarantee_ != Guarantee::kManual) {
    if (engine_ != nullptr) engine_->misplaced_manual_call();
    return;
  }
  manual_ = Manual::kNack;
  nack_delay_ = delay;
}

}  // namespace idem
