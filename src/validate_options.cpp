// Build-time checks of a consumer's configuration (docs/design.md §2: contradictory
// options fail at start-up with a message that names the option).
#include "validate_options.hpp"

#include <string>

#include "idem/state_gate.hpp"

namespace idem::detail {

namespace {

// Ordering and state machines (docs/design.md §5, §6).
Status validate_ordering(const ConsumerOptions& o, const ExtractorSet& x) {
  const OrderingOptions& ord = o.ordering;
  const std::string mode(ordering_name(ord.mode));
  if (!ord.dead_letter_to.empty() && ord.mode != Ordering::kStrict)
    return invalid_argument("ordering.dead_letter_to needs ordering.mode = strict (only strict ordering buffers)");
  if (ord.mode == Ordering::kWatermark) {
    if (!x.stream || !x.position)
      return invalid_argument("ordering.mode = watermark needs Extractors::stream and Extractors::position");
    if (o.machine)
      return invalid_argument(
          "ConsumerOptions::machine cannot be combined with ordering.mode = watermark; "
          "use monotonic or strict ordering with a state machine");
    return ok_status();
  }
  const bool by_version = ord.mode == Ordering::kMonotonic || ord.mode == Ordering::kStrict;
  if (!by_version && !o.machine) return ok_status();
  const std::string what = by_version ? "ordering.mode = " + mode : std::string("ConsumerOptions::machine");
  if (o.guarantee != Guarantee::kEffectivelyOnce && o.guarantee != Guarantee::kManual)
    return invalid_argument(what +
                            " requires guarantee effectively_once or manual (entity state changes only in the "
                            "dedup commit), not " +
                            std::string(guarantee_name(o.guarantee)));
  if (o.store->entities() == nullptr)
    return invalid_argument(what +
                            " needs a store that keeps entity records (memory:, sqlite:, rocksdb:, redis://, "
                            "bloom+<durable>:); this store does not");
  if (o.on_store_failure == StoreFailurePolicy::kFailOpen)
    return invalid_argument("ConsumerOptions::on_store_failure = fail_open contradicts " + what +
                            ": without the store no order or state can be checked");
  if (!x.key) return invalid_argument(what + " needs Extractors::key");
  if (by_version && !x.version) return invalid_argument(what + " needs Extractors::version");
  if (o.machine && !x.event) return invalid_argument("ConsumerOptions::machine needs Extractors::event");
  if (ord.max_key_bytes == 0) return invalid_argument("ordering.max_key_bytes must be > 0");
  if (ord.mode == Ordering::kStrict) {
    if (!x.codec)
      return invalid_argument(
          "ordering.mode = strict needs Extractors::encode and Extractors::decode (buffered "
          "messages are stored encoded and handled later)");
    if (!o.on_buffered)
      return invalid_argument(
          "ordering.mode = strict needs ConsumerOptions::on_buffered: a buffered message that is "
          "later dead-lettered (retries, gap policy) can only be handed over there");
    if (ord.gap_timeout.count() <= 0) return invalid_argument("ordering.gap_timeout must be > 0 ms");
    if (ord.limits.per_key == 0 || ord.limits.total == 0 || ord.limits.total_bytes == 0)
      return invalid_argument("ordering.limits (per_key, total, total_bytes) must be > 0");
    if (ord.first_version && *ord.first_version == 0)
      return invalid_argument("ordering.first_version must be >= 1 (or nullopt: the first version that arrives)");
    if (ord.drain_per_call == 0) return invalid_argument("ordering.drain_per_call must be > 0");
    if (!ord.dead_letter_to.empty() && !o.outbox.publishers)
      return invalid_argument(
          "ordering.dead_letter_to needs ConsumerOptions::outbox.publishers: the dead letter is written to the "
          "outbox and sent through a publisher for that destination");
  }
  return ok_status();
}

// The transactional outbox (docs/design.md §10).
Status validate_outbox(const ConsumerOptions& o) {
  if (!o.outbox.publishers) return ok_status();
  if (!o.transactional && o.ordering.dead_letter_to.empty())
    return invalid_argument(
        "ConsumerOptions::outbox needs transactional = true: outgoing messages are written in the "
        "handler's transaction, with the dedup record (only ordering.dead_letter_to uses it without)");
  if (o.store->outbox() == nullptr)
    return invalid_argument(
        "ConsumerOptions::outbox needs a store that keeps an outbox (sqlite:, rocksdb:, postgres://); "
        "this store does not");
  if (o.outbox.dispatch_batch == 0) return invalid_argument("ConsumerOptions::outbox.dispatch_batch must be > 0");
  if (o.outbox.resend_after.count() <= 0)
    return invalid_argument("ConsumerOptions::outbox.resend_after must be > 0 ms");
  return ok_status();
}

}  // namespace

Status validate_options(const ConsumerOptions& o, const ExtractorSet& x) {
  const std::string g(guarantee_name(o.guarantee));
  if (needs_dedup(o.guarantee) && !o.store)
    return invalid_argument("ConsumerOptions::store is required under guarantee " + g +
                            " (it keeps dedup records); use e.g. idem::open_store(\"sqlite:PATH\")");
  if (!needs_dedup(o.guarantee) && o.store)
    return invalid_argument(
        "ConsumerOptions::store must be null under guarantee at_least_once, which keeps no dedup record; "
        "choose effectively_once to use the store");
  if (needs_dedup(o.guarantee) && !x.id) return invalid_argument("Extractors::id is required under guarantee " + g);
  if (o.lease.count() <= 0) return invalid_argument("ConsumerOptions::lease must be > 0 ms");
  if (o.ttl.count() <= 0) return invalid_argument("ConsumerOptions::ttl must be > 0 ms");
  if (o.backoff.initial.count() < 0) return invalid_argument("ConsumerOptions::backoff.initial must be >= 0 ms");
  if (!(o.backoff.multiplier >= 1.0)) return invalid_argument("ConsumerOptions::backoff.multiplier must be >= 1");
  if (o.backoff.max < o.backoff.initial)
    return invalid_argument("ConsumerOptions::backoff.max must be >= backoff.initial");
  if (o.store_retry_delay.count() < 0) return invalid_argument("ConsumerOptions::store_retry_delay must be >= 0 ms");
  if (o.max_id_bytes == 0) return invalid_argument("ConsumerOptions::max_id_bytes must be > 0");
  if (o.max_event_bytes == 0) return invalid_argument("ConsumerOptions::max_event_bytes must be > 0");
  if (o.max_payload_bytes == 0) return invalid_argument("ConsumerOptions::max_payload_bytes must be > 0");
  if (o.ordering.max_stream_bytes == 0) return invalid_argument("ordering.max_stream_bytes must be > 0");
  if (o.broker_ack_timeout.count() < 0) return invalid_argument("ConsumerOptions::broker_ack_timeout must be >= 0 ms");
  if (o.purge_every > 0 && o.purge_batch == 0)
    return invalid_argument("ConsumerOptions::purge_batch must be > 0 when purge_every is set");
  if (o.transactional) {
    if (o.guarantee != Guarantee::kEffectivelyOnce && o.guarantee != Guarantee::kManual)
      return invalid_argument("ConsumerOptions::transactional requires guarantee effectively_once or manual, not " + g);
    if (!o.store->capabilities().transactional)
      return invalid_argument(
          "ConsumerOptions::transactional needs a transactional store (sqlite:, rocksdb:); "
          "this store is not");
    if (o.on_store_failure == StoreFailurePolicy::kFailOpen)
      return invalid_argument(
          "ConsumerOptions::on_store_failure = fail_open contradicts transactional: "
          "the handler's writes need the store");
  }
  if (o.store && o.store->capabilities().probabilistic && !o.allow_probabilistic_store &&
      (o.guarantee == Guarantee::kEffectivelyOnce || o.guarantee == Guarantee::kManual))
    return invalid_argument(
        "the store is probabilistic (a false positive drops a new message as a duplicate); "
        "set ConsumerOptions::allow_probabilistic_store = true to accept that under " +
        g);
  if (Status s = validate_ordering(o, x); !s.ok()) return s;
  return validate_outbox(o);
}

}  // namespace idem::detail
