// Umbrella header: the whole application API of idem — the consumer and its options,
// handlers and decisions, the store contract and its errors, ordering and state-gate
// types, the outbox, the consumer runtime and its message sources, open_store() when
// the idem::stores component is installed, and open_source() and open_publisher()
// when idem::brokers is. What only backend authors need
// (idem/backend/) and the internals behind the templates (idem/detail/) are not here.
#pragma once

#include "idem/clock.hpp"
#include "idem/consumer.hpp"
#include "idem/decision.hpp"
#include "idem/entity.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guarantee.hpp"
#include "idem/handler.hpp"
#include "idem/message.hpp"
#include "idem/metrics.hpp"
#include "idem/options.hpp"
#include "idem/ordering.hpp"
#include "idem/outbox.hpp"
#include "idem/publisher.hpp"
#include "idem/runtime.hpp"
#include "idem/source.hpp"
#include "idem/state_gate.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"
#include "idem/store_clock.hpp"
#if __has_include("idem/open_store.hpp")
#include "idem/open_store.hpp"
#endif
#if __has_include("idem/open_source.hpp")
#include "idem/open_source.hpp"
#endif
