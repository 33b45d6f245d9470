// The idem paths: Consumer<Msg> with a no-op handler, effectively_once, the system
// clock and default options, over the memory store and (when built) idem::sqlite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "id_stream.hpp"
#include "idem/store.hpp"
#include "path_result.hpp"

namespace idem::bench {

// How deliveries are fed to the consumer.
struct Feed {
  bool batch = false;       // false: Consumer::process per message; true: process_batch
  std::size_t size = 1000;  // messages per process_batch call; default 1000
};

// Runs the whole stream through a fresh Consumer over `store`. Decisions are counted
// by reason (processed, duplicate, anything else).
PathResult run_consumer(std::shared_ptr<Store> store, const Stream& s, Feed feed);

// The memory store (idem::memory::open), sized to hold every id of the stream.
PathResult run_memory(const Stream& s, Feed feed);

// The memory store called directly (claim, then commit when granted), one clock read
// per message, no Consumer: the store's share of the memory path's cost.
PathResult run_memory_store_direct(const Stream& s);

// Consumer::process over the memory store, each message timed, and inside it each store
// call: fills added_p50_us / added_p99_us with the middleware's own time per message
// (store excluded). The timing's clock reads make the rate lower than run_memory's.
PathResult run_memory_overhead(const Stream& s);

#ifdef IDEM_BENCH_WITH_SQLITE_STORE
// idem::sqlite at `path` (fresh; deleted afterwards), default options except leases.
// shared_leases: LeaseMode::kShared instead of the default kLocal.
PathResult run_idem_sqlite(const std::string& path, const Stream& s, Feed feed, bool shared_leases);
#endif

}  // namespace idem::bench
