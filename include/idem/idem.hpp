// Umbrella header: the whole public core API.
#pragma once

#include "idem/clock.hpp"
#include "idem/consumer.hpp"
#include "idem/decision.hpp"
#include "idem/engine.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guarantee.hpp"
#include "idem/handler.hpp"
#include "idem/message.hpp"
#include "idem/metrics.hpp"
#include "idem/options.hpp"
#include "idem/outbox.hpp"
#include "idem/publisher.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"
#include "idem/store_uri.hpp"
#include "idem/store_wrapper.hpp"
