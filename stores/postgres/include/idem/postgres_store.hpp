// postgres://USER[:PASS]@HOST[:PORT]/DB — the shared store on PostgreSQL (idem::postgres,
// libpq).
//
// Layout: every table lives in one schema (Options::schema, default "idem"), created if
// absent: idem_meta(key, value) holds 'schema_version'; idem_records one row per id
// (bytea primary key) with its state, lease owner and expiry, fingerprint, result,
// retry count and record expiry; idem_entities one row per entity key; idem_buffer the
// reorder buffer (PRIMARY KEY (key, version)); idem_buffer_totals one row with the
// buffer's entries and bytes; idem_outbox the transactional outbox (outbox.hpp), one
// row per outgoing message in commit order (seq), with its sent expiry (NULL while
// unsent). A schema written by a newer build is refused (kFailedPrecondition naming
// both versions); an older one is upgraded at open (version 1 has no outbox; version 2
// leaves less room in the pages of idem_records for a commit's update).
//
// Leases live in the rows, so any number of processes on any number of hosts share the
// store. A claim is one statement (INSERT … ON CONFLICT (id) DO UPDATE … WHERE the
// record is absent, expired or its lease has expired); a commit is one statement that
// writes the record only if no other owner holds a live lease and the id is not done.
// Times are the callers' `now` (docs/design.md §4): processes sharing a store need
// clocks that agree to well within a lease. A claim outside a transaction of the
// caller's commits with synchronous_commit off: the lease is visible to every other
// process at once, but a server crash may drop the leases taken in the last moments
// before it (as if they had expired early). Commits, releases and entity writes wait
// for their flush (the server's synchronous_commit).
//
// Batches: claim_batch and commit_batch cost one round trip each when every request
// is granted / written: the requests travel as arrays (sorted by id, so that concurrent
// batches lock rows in one order) and one statement unnests them (see docs/stores.md
// for the measurement against libpq pipeline mode). The requests that statement did
// not grant or write (a duplicate, a held lease, an id without a row) are then made
// one by one, to answer each exactly as a single call would. A batch that holds an id
// twice or requests with different `now` is made one by one; a commit batch with
// entity writes (or with a fault hook) is one transaction, a savepoint per entity item.
//
// Entity records and the reorder buffer (entity.hpp): a commit with an entity write is
// one transaction (record, revision compare-and-set, buffer removal).
//
// The outbox (Store::outbox()): a commit with CommitRequest::outbox entries is
// one transaction (the record, then one INSERT of every entry); a commit batch with
// entries is one transaction whose last statement inserts the entries of every item
// written. outbox_mark_sent is one UPDATE of the whole span; purge_expired removes
// sent entries past their expiry after the records, in the same bound.
//
// Transactional mode: begin() takes a connection of the pool and opens a transaction
// on it; the handler writes its own tables through connection(ctx) and the dedup
// record lands in the same transaction (COMMIT). A connection lost before the COMMIT
// answered is kUnavailable: PostgreSQL rolls the transaction back, so nothing of it
// (handler writes included) landed. begin_batch() opens one transaction for many
// handlers, each in a SAVEPOINT. While a transaction or batch is open, every store
// call from the thread that opened it runs on its connection.
//
// TTL: expired records stay until purge_expired (bounded, a rotating scan over the
// primary key) removes them; claim and inspect already treat them as absent. Sent
// outbox entries stay until purge_expired too (a bounded scan from the oldest).
//
// Thread-safety: thread-safe; a pool of connections, one per concurrent call.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "idem/handler.hpp"
#include "idem/store.hpp"

struct pg_conn;
typedef struct pg_conn PGconn;  // NOLINT: libpq's own declaration

namespace idem::postgres {

struct Options {
  // libpq connection parameters (keyword, value), e.g. {"host", "/run/pg"},
  // {"port", "5432"}, {"dbname", "app"}, {"user", "u"}, {"password", "…"}. The store
  // adds network timeouts where these set none (connect_timeout 10, keepalives 1,
  // keepalives_idle 5, keepalives_interval 2, keepalives_count 3, tcp_user_timeout
  // 10000) and sets the server's keepalives per session: a cut connection fails
  // within about 10 s instead of hanging (docs/stores.md).
  // REQUIRES: no "dbname" value that is itself a connection string.
  std::vector<std::pair<std::string, std::string>> connection;
  // The schema holding idem's tables; created if absent. Always quoted as an
  // identifier (any bytes but NUL; hyphens allowed). REQUIRES: 1 to 63 bytes.
  std::string schema = "idem";
  // Most connections open at once; a call waits for a free one. Default 8; REQUIRES: > 0.
  std::size_t pool_size = 8;
  // Tests only (see store.hpp); null by default. Called inside the commit's transaction
  // at "commit.before_write", "commit.after_record" and (entity writes)
  // "commit.after_entity"; in commit_batch at "commit_batch.before_write",
  // "commit_batch.after_first" and "commit_batch.before_commit"; in outbox_mark_sent
  // at "outbox.mark_sent.before_commit". A non-OK answer rolls the transaction back
  // and is returned. With a hook set, every commit and outbox_mark_sent runs as a
  // transaction.
  FaultHook fault_hook;
};

// Connects (one connection, more on demand), creates the schema and tables if absent
// and checks the schema version. Errors: kInvalidArgument (bad options), kUnavailable
// (cannot connect; the message never holds the password), kFailedPrecondition (written
// by a newer schema version), kDataLoss (idem_meta without a schema version).
StatusOr<std::shared_ptr<Store>> open(const Options& options);

// From a URI: postgres:// or postgresql://USER[:PASS]@HOST[:PORT]/DB?params. idem's own
// parameters are taken out: schema=S (Options::schema), pool=N (Options::pool_size);
// every other parameter goes to libpq as a connection keyword (e.g. host=SOCKET_DIR,
// sslmode=require, connect_timeout=5). Returns kInvalidArgument for a malformed URI or
// option, and open()'s errors.
StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri);

// Parses a URI into Options without connecting (open(uri) uses it).
StatusOr<Options> parse_uri(const StoreUri& uri);

// The connection of the open transaction in transactional mode: the handler writes its
// own tables through it (plain SQL, no BEGIN/COMMIT/ROLLBACK). Null if ctx carries no
// PostgreSQL transaction.
PGconn* connection(const HandlerContext& ctx);

// `name` quoted as a PostgreSQL identifier ("a""b" for a"b).
std::string quote_identifier(std::string_view name);

// The schema version this build writes.
inline constexpr int kSchemaVersion = 3;

}  // namespace idem::postgres
