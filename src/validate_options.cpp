// Build-time checks of a consumer's configuration (DESIGN.md §2: contradictory
// options fail at start-up with a message that names the option).
#include "validate_options.hpp"

#include <string>

namespace idem::detail {

Status validate_options(const ConsumerOptions& o, const ExtractorSet& x) {
  const std::string g(guarantee_name(o.guarantee));
  if (needs_dedup(o.guarantee) && !o.store)
    return invalid_argument("ConsumerOptions::store is required under guarantee " + g +
                            " (it keeps dedup records); use e.g. idem::open_store(\"sqlite:PATH\")");
  if (!needs_dedup(o.guarantee) && o.store)
    return invalid_argument(
        "ConsumerOptions::store must be null under guarantee at_least_once, which keeps no dedup record; "
        "choose effectively_once to use the store");
  if (needs_dedup(o.guarantee) && !x.id)
    return invalid_argument("Extractors::id is required under guarantee " + g);
  if (o.lease.count() <= 0) return invalid_argument("ConsumerOptions::lease must be > 0 ms");
  if (o.ttl.count() <= 0) return invalid_argument("ConsumerOptions::ttl must be > 0 ms");
  if (o.backoff.initial.count() < 0) return invalid_argument("ConsumerOptions::backoff.initial must be >= 0 ms");
  if (!(o.backoff.multiplier >= 1.0)) return invalid_argument("ConsumerOptions::backoff.multiplier must be >= 1");
  if (o.backoff.max < o.backoff.initial)
    return invalid_argument("ConsumerOptions::backoff.max must be >= backoff.initial");
  if (o.store_retry_delay.count() < 0) return invalid_argument("ConsumerOptions::store_retry_delay must be >= 0 ms");
  if (o.max_id_bytes == 0) return invalid_argument("ConsumerOptions::max_id_bytes must be > 0");
  if (o.broker_ack_timeout.count() < 0) return invalid_argument("ConsumerOptions::broker_ack_timeout must be >= 0 ms");
  if (o.purge_every > 0 && o.purge_batch == 0)
    return invalid_argument("ConsumerOptions::purge_batch must be > 0 when purge_every is set");
  if (o.transactional) {
    if (o.guarantee != Guarantee::kEffectivelyOnce && o.guarantee != Guarantee::kManual)
      return invalid_argument("ConsumerOptions::transactional requires guarantee effectively_once or manual, not " + g);
    if (!o.store->capabilities().transactional)
      return invalid_argument("ConsumerOptions::transactional needs a transactional store (sqlite:, rocksdb:); "
                              "this store is not");
    if (o.on_store_failure == StoreFailurePolicy::kFailOpen)
      return invalid_argument("ConsumerOptions::on_store_failure = fail_open contradicts transactional: "
                              "the handler's writes need the store");
  }
  if (o.store && o.store->capabilities().probabilistic && !o.allow_probabilistic_store &&
      (o.guarantee == Guarantee::kEffectivelyOnce || o.guarantee == Guarantee::kManual))
    return invalid_argument("the store is probabilistic (a false positive drops a new message as a duplicate); "
                            "set ConsumerOptions::allow_probabilistic_store = true to accept that under " + g);
  return Status::ok();
}

}  // namespace idem::detail
