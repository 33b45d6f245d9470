// Consumer<Msg>: the middleware. Wrap a handler, feed it deliveries, act on the
// Decisions.
//
//   #include <idem/open_store.hpp>   // idem::open_store, target idem::stores
//
//   idem::ConsumerOptions opts;
//   opts.store = idem::open_store("sqlite:/var/lib/app/idem.db").value();
//   idem::Extractors<Order> ex;
//   ex.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
//   auto consumer = idem::Consumer<Order>::create(opts, ex,
//       [](const Order& o, idem::HandlerContext&) { ship(o); return idem::HandlerResult::ok(); });
//   idem::Decision d = consumer->process(order);   // then ack / nack / dead-letter
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/detail/engine.hpp"
#include "idem/message.hpp"

namespace idem {

template <class Msg>
class Consumer {
 public:
  using Handler = std::function<HandlerResult(const Msg&, HandlerContext&)>;

  // Returns kInvalidArgument (naming the option) for a contradictory configuration.
  static StatusOr<Consumer> create(ConsumerOptions options, Extractors<Msg> extractors, Handler handler) {
    if (!handler) return invalid_argument("Consumer::create: the handler is empty");
    auto engine = detail::Engine::create(std::move(options), ExtractorSet::of(extractors));
    if (!engine.ok()) return engine.status();
    return Consumer(std::move(engine).value(), std::move(extractors), std::move(handler));
  }

  // Runs one delivery through the pipeline. Thread-safe. Never throws for a handler's
  // exception: it becomes a handler failure.
  Decision process(const Msg& m) {
    const Msg* one = &m;
    Call call{this, std::span<const Msg>(one, 1)};
    return engine_->process(extractors_.view(m), call.thunk(), 0);
  }

  // Lookahead, for a sequential caller that already holds the next delivery: returns
  // process(m)'s decision and, with the store's help, claims `next` in the same round
  // trip as m's commit, so that a sequential consumer pays one store round trip per
  // message instead of two. The claim is kept for the following call: when that is
  // process(next) (or process(next, after)) it runs next under it; any other call
  // (another id, process_batch) releases it first, as do flush_lookahead() and
  // destruction. A consumer that crashes while keeping it leaves next claimable
  // once the lease expires. m's decision is returned only after m's commit is on the
  // store. Applies only to effectively_once consumers without ordering (by version or
  // watermark), state machine or transaction, over a store with
  // capabilities().combined_commit_claim (idem::redis); otherwise it is process(m).
  // Thread-safe, but one kept claim per consumer: meant for one sequential caller.
  Decision process(const Msg& m, const Msg& next) {
    const Msg* one = &m;
    Call call{this, std::span<const Msg>(one, 1)};
    const MessageView nv = extractors_.view(next);
    return engine_->process_ahead(extractors_.view(m), call.thunk(), &nv, 0);
  }

  // Releases the claim process(m, next) keeps for next, if any (e.g. when next will
  // not be processed here). Returns the release's status.
  Status flush_lookahead() { return engine_->flush_lookahead(); }

  // Runs many deliveries with batched store calls. Decisions in input order.
  std::vector<Decision> process_batch(std::span<const Msg> ms) {
    std::vector<MessageView> views;
    views.reserve(ms.size());
    for (const Msg& m : ms) views.push_back(extractors_.view(m));
    Call call{this, ms};
    return engine_->process_batch(views, call.thunk());
  }

  // See Engine::tick(): drains and gap timeouts in idle periods; call once at start-up.
  std::size_t tick() {
    Call call{this, {}};
    return engine_->tick(call.thunk());
  }

  // See Engine::reset_watermark().
  void reset_watermark(std::string_view stream, std::uint64_t position) { engine_->reset_watermark(stream, position); }

  Metrics& metrics() { return engine_->metrics(); }
  const ConsumerOptions& options() const { return engine_->options(); }

  // The entity key this consumer reads from m (Extractors::key), or nullopt when it
  // has no key extractor or m has no key. The runtime uses it to keep per-key order.
  std::optional<std::string_view> key_of(const Msg& m) const {
    if (!extractors_.key) return std::nullopt;
    return extractors_.key(m);
  }

  // The message id this consumer reads from m (Extractors::id), or nullopt when m has
  // none. The runtime runs the copies of one id one after another.
  std::optional<std::string_view> id_of(const Msg& m) const {
    if (!extractors_.id) return std::nullopt;
    return extractors_.id(m);
  }

 private:
  struct Call {
    Consumer* self;
    std::span<const Msg> ms;
    static HandlerResult invoke(void* p, std::size_t i, HandlerContext& ctx) {
      auto* c = static_cast<Call*>(p);
      return c->self->handler_(c->ms[i], ctx);
    }
    static bool invoke_encoded(void* p, std::string_view bytes, HandlerContext& ctx, HandlerResult& out) {
      auto* c = static_cast<Call*>(p);
      std::optional<Msg> m = c->self->extractors_.decode(bytes);
      if (!m) return false;
      out = c->self->handler_(*m, ctx);
      return true;
    }
    static std::string encode(void* p, std::size_t i) {
      auto* c = static_cast<Call*>(p);
      return c->self->extractors_.encode(c->ms[i]);
    }
    detail::HandlerThunk thunk() {
      if (!(self->extractors_.encode && self->extractors_.decode)) return {this, &Call::invoke, nullptr, nullptr};
      return {this, &Call::invoke, &Call::encode, &Call::invoke_encoded};
    }
  };

  Consumer(std::unique_ptr<detail::Engine> e, Extractors<Msg> x, Handler h)
      : engine_(std::move(e)), extractors_(std::move(x)), handler_(std::move(h)) {}

  std::unique_ptr<detail::Engine> engine_;
  Extractors<Msg> extractors_;
  Handler handler_;
};

}  // namespace idem
