// redis://… — the shared store (idem::redis): one dedup state for many consumer
// processes on many machines, on a standalone Redis server or a Redis Cluster.
//
// Entities (Store::entities()): entity records and the reorder buffer of
// entity.hpp. Every key of one entity shares the entity's hash tag; on a cluster the
// record of an id claimed with an entity key does too (RedisStore::record_key(id,
// entity_key)), so a commit with an entity write is one script in one slot. The
// caller then passes the same entity key on every claim, release, extend and commit
// of the id (store.hpp). Buffer totals and the index of buffered keys are global: on
// a standalone server they change in the same script; on a cluster they live in
// another slot and change in a second command, so total limits and buffer_summary's
// order are approximate there (the per-key limit stays exact).
//
// Atomicity: every state change is one atomic server-side step: a Lua script (commit,
// release, extend, and claim of an id whose key exists) or, for the claim of an id
// whose key is absent, a plain SET NX PX of the value the script would write. Scripts
// are loaded once (SCRIPT LOAD, then EVALSHA, falling back to EVAL on NOSCRIPT). Ids,
// owners and results are passed as binary-safe arguments, never spliced into command
// text or scripts.
//
// Key layout (docs/stores.md): one string key per message id, its value a MessagePack
// array that the client encodes for fresh claims and commits and the scripts decode:
//   <prefix>{<id>}  →  [state, owner, lease_until_ms, expires_ms, retries,
//                       fingerprint|false, result|false]
// state: 'i' in progress (leased), 'p' pending (only a retry count), 'c' completed,
// 'x' dead-lettered. The braces make the id the Redis Cluster hash tag. An entity's
// keys carry the entity's own tag T (the key with '%' and '}' escaped):
// <prefix>{T}:e (a hash: revision, version, state), <prefix>{T}:b and :t (sorted
// sets: the buffered messages by version, and their buffered_at); on a cluster, the
// record of an id claimed with that entity key is <prefix>{T}:d:<escaped id>. The
// buffer's totals and the index of keys with entries are <prefix>{%}:totals and
// <prefix>{%}:index.
//
// Time: every deadline is computed from the caller's `now` and stored in the record's
// value; the scripts decide liveness by comparing with the caller's `now`, so expiry
// follows the injected clock exactly. The server's own expiry (the PX of every SET of
// a record) is only a safety net that frees memory: the remaining time of the latest
// deadline plus Options::expiry_slack. Entity records and buffer entries never
// expire.
//
// Threads: thread-safe. Each call borrows a connection from a per-node pool (creating
// one when none is idle) and returns it afterwards, so concurrent calls never share a
// connection. Failures of the environment (server down or slow, connection lost,
// cluster down) are kUnavailable: the engine answers `retry` (fail-closed).
//
// TLS (Options::tls, rediss:// or the tls_* parameters of tls_options.hpp): every
// connection to every node, a cluster's included, verifies the server's certificate
// against the CA (default: the system's trust store) and its name or IP address
// against the node's address, unless tls.insecure. A cluster's nodes are reached at
// the addresses they announce, which their certificates must then name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/store.hpp"

namespace idem::redis {

struct Endpoint {
  std::string host;        // name or address, e.g. "127.0.0.1"
  std::uint16_t port = 0;  // REQUIRES: > 0
};

struct Options {
  // Standalone: the server. Cluster: seed nodes (any reachable one is enough).
  // REQUIRES: non-empty.
  std::vector<Endpoint> endpoints;
  // Talk Redis Cluster (slot routing, redirections). Default off: open() then asks the
  // one server given (INFO cluster) and talks Redis Cluster anyway if it is a cluster
  // node, so one node's address is enough. Several endpoints need cluster = true.
  bool cluster = false;
  std::string user;      // ACL user for AUTH; empty (default): password-only AUTH
  std::string password;  // empty (default): no AUTH
  int db = 0;            // SELECT this database (standalone only; cluster: must be 0)
  TlsOptions tls;        // default: plaintext
  // Prepended to every key. Must not contain '{' or '}' (the hash-tag braces).
  // Default "idem:".
  std::string prefix = "idem:";
  Duration connect_timeout{1000};  // ms to establish a connection; default 1 s
  Duration command_timeout{1000};  // ms to wait for a reply; default 1 s
  // After a failed connect to a node, no new connect to it is tried for a backoff that
  // starts at reconnect_min and doubles up to reconnect_max; calls meanwhile return
  // kUnavailable at once. Defaults 50 ms and 2 s.
  Duration reconnect_min{50};
  Duration reconnect_max{2000};
  std::size_t pool_max_idle = 16;  // idle connections kept per node; default 16
  // Added to the server-side expiry of every key (see "Time" above). Default 60 s.
  Duration expiry_slack{60'000};
  // Opt-in synchronous replication: after commits, WAIT for this many replicas to
  // acknowledge, up to wait_timeout. 0 (default): do not wait. A commit that fewer
  // replicas acknowledged in time returns kUnavailable (it did land on the master; a
  // redelivery is then answered as a duplicate unless a failover lost it).
  int wait_replicas = 0;
  Duration wait_timeout{100};  // ms for WAIT; default 100; REQUIRES: > 0 if wait_replicas
  // Cluster: how often a command is retried after TRYAGAIN, CLUSTERDOWN or a node
  // that cannot be reached (with a slot-map refresh in between), and the pause before
  // each retry. Then kUnavailable. Defaults 5 and 100 ms.
  int cluster_retries = 5;
  Duration cluster_retry_delay{100};
  int max_redirects = 5;  // MOVED/ASK redirections followed per command; default 5
};

// A store opened by redis::open: the Store contract and where it keeps what, for
// tools and tests.
class RedisStore : public Store {
 public:
  // The key that holds id's record.
  virtual std::string record_key(std::string_view id) const = 0;
  // The key that holds the record of an id claimed with entity_key (in the entity's
  // slot on a cluster; docs/stores.md). kInvalidArgument for an empty entity_key.
  virtual StatusOr<std::string> record_key(std::string_view id, std::string_view entity_key) const = 0;
  // Store::inspect of an id claimed with entity_key (whose record
  // record_key(id, entity_key) holds).
  virtual StatusOr<std::optional<RecordInfo>> inspect_with_entity(std::string_view id, std::string_view entity_key,
                                                                  TimePoint now) = 0;
};

// Connects (and authenticates, selects the database, loads the scripts, and for a
// cluster reads the slot map). Without options.cluster it first asks the server
// whether it is a Redis Cluster node (INFO cluster), and if so opens as with
// options.cluster. The store answers commit_then_claim in one round trip (the commit
// script and the claim's SET NX sent together; a second round trip only when the
// claimed id's key exists), so capabilities().combined_commit_claim is set.
// Errors: kInvalidArgument naming the option that cannot be met (see Options), a
// wrong password or user, or a database other than 0 on a cluster node, or a TLS file
// that cannot be loaded; kFailedPrecondition when a server's certificate or name is
// not accepted;
// kUnavailable if no server (no seed node) is reachable within connect_timeout /
// command_timeout; a refused SCRIPT LOAD as the server's error maps (e.g.
// kResourceExhausted for OOM).
StatusOr<std::shared_ptr<RedisStore>> open(const Options& options);

// From a URI:
//   redis[s]://[user:password@]HOST:PORT[,HOST:PORT…][/DB]?prefix=…&cluster=0|1
//       &connect_timeout_ms=N&command_timeout_ms=N&wait_replicas=N&wait_timeout_ms=N
//       &pool_max_idle=N&expiry_slack_ms=N&tls_ca=…&tls_cert=…&tls_key=…
// (user, password and prefix percent-encoded; rediss:// and any tls_* parameter
// mean TLS); every parameter left out keeps its
// Options default. Returns kInvalidArgument naming what is wrong with the URI, and
// open()'s errors.
StatusOr<std::shared_ptr<RedisStore>> open(const StoreUri& uri);

// Parses a URI into Options without connecting.
StatusOr<Options> parse_uri(const StoreUri& uri);

}  // namespace idem::redis
