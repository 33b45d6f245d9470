// idem::postgres against raw PostgreSQL inserts on the same server, in one run:
//   raw_seq_insert   one autocommit INSERT … ON CONFLICT (id) DO NOTHING per id
//                    (prepared, one round trip, one commit each)
//   idem_seq         Store::claim then Store::commit per message: two statements,
//                    two round trips, two commits
//   raw_batch_insert one INSERT … SELECT FROM unnest($1::bytea[]) ON CONFLICT DO
//                    NOTHING per --batch ids: one round trip, one commit per batch
//   raw_pipe_insert  --batch single-row inserts in libpq pipeline mode, one Sync:
//                    one round trip, one commit per batch, one statement per id
//   idem_batch       claim_batch then commit_batch per --batch messages: two round
//                    trips, two commits per batch (the store sends arrays, unnested)
//   floor_batch      the least PostgreSQL work for what idem_batch promises, on a
//                    table of three columns (id, state, lease end; pages filled to
//                    45% as the store's, so the updates stay on the page): per batch one
//                    INSERT of the leases that commits without waiting for its flush
//                    (as the store's claims do), then one UPDATE of the same rows to
//                    completed, durable: every row written twice, as leases visible
//                    to other processes before the handlers run require
// and the ratios idem_seq / raw_seq_insert, idem_batch / raw_batch_insert and
// floor_batch / raw_batch_insert (the best idem_batch / raw_batch_insert can be).
// raw_pipe_insert vs raw_batch_insert is the measurement behind the store's choice of
// arrays over pipeline mode for its batches.
//
// By default the bench starts its own server (initdb into a temporary folder,
// postgres on a free port of 127.0.0.1, default durability settings: fsync on);
// --conninfo uses a running server instead (tables are created in schema bench_pg).
#include <libpq-fe.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "idem/postgres_store.hpp"
#ifdef IDEM_BENCH_SPAWN_POSTGRES
#include "support/postgres_server.hpp"
#endif

namespace {

using idem::ClaimRequest;
using idem::ClaimStatus;
using idem::CommitRequest;
using idem::Duration;
using Clock = std::chrono::steady_clock;

struct Config {
  std::size_t messages = 500;  // per sequential path and round
  std::size_t batch_messages = 20'000;
  std::size_t batch = 500;
  int repeat = 5;
  bool strict = false;
  std::string conninfo;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_postgres: %s\n", what.c_str());
  std::exit(1);
}

std::vector<std::string> ids_for(const std::string& run, std::size_t n) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) ids.push_back("orders-" + run + "-" + std::to_string(i));
  return ids;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
    die(sql + ": " + PQresultErrorMessage(r));
  PQclear(r);
}

void expect_ok(PGresult* r, const char* what) {
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
    die(std::string(what) + ": " + PQresultErrorMessage(r));
  PQclear(r);
}

// The binary form of a one-dimensional bytea[] (as the store sends it).
std::string bytea_array(const std::vector<std::string>& ids, std::size_t from, std::size_t n) {
  std::string out;
  auto u32 = [&out](std::uint32_t v) {
    for (int i = 3; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  u32(1), u32(0), u32(17), u32(static_cast<std::uint32_t>(n)), u32(1);
  for (std::size_t i = from; i < from + n; ++i) {
    u32(static_cast<std::uint32_t>(ids[i].size()));
    out += ids[i];
  }
  return out;
}

class Raw {
 public:
  explicit Raw(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(c_) != CONNECTION_OK) die(std::string("connect: ") + PQerrorMessage(c_));
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
    exec(c_, "CREATE SCHEMA IF NOT EXISTS bench_pg");
    exec(c_, "DROP TABLE IF EXISTS bench_pg.raw; CREATE TABLE bench_pg.raw(id bytea PRIMARY KEY)");
    exec(c_,
         "DROP TABLE IF EXISTS bench_pg.floor; CREATE TABLE bench_pg.floor(id bytea PRIMARY KEY,"
         " state smallint NOT NULL, lease_until_ms bigint NOT NULL) WITH (fillfactor = 45)");
    const Oid bytea = 17, bytea_array = 1001;
    expect_ok(PQprepare(c_, "one", "INSERT INTO bench_pg.raw(id) VALUES ($1) ON CONFLICT (id) DO NOTHING", 1, &bytea),
              "prepare");
    expect_ok(PQprepare(c_, "many",
                        "INSERT INTO bench_pg.raw(id) SELECT * FROM unnest($1::bytea[]) ON CONFLICT (id) DO NOTHING", 1,
                        &bytea_array),
              "prepare");
    expect_ok(PQprepare(c_, "floor_claim",
                        "INSERT INTO bench_pg.floor SELECT q.id, 1, 0 FROM unnest($1::bytea[]) AS q(id)"
                        " CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true) AS v) cfg"
                        " WHERE cfg.v IS NOT NULL ON CONFLICT (id) DO NOTHING",
                        1, &bytea_array),
              "prepare");
    expect_ok(PQprepare(c_, "floor_commit",
                        "UPDATE bench_pg.floor SET state = 2, lease_until_ms = 0 WHERE id = ANY($1::bytea[])"
                        " AND state = 1",
                        1, &bytea_array),
              "prepare");
  }
  ~Raw() { PQfinish(c_); }

  void one(const std::string& id) {
    const char* v = id.data();
    const int len = static_cast<int>(id.size()), fmt = 1;
    expect_ok(PQexecPrepared(c_, "one", 1, &v, &len, &fmt, 0), "insert");
  }
  void many(const std::vector<std::string>& ids, std::size_t from, std::size_t n) {
    const std::string a = bytea_array(ids, from, n);
    const char* v = a.data();
    const int len = static_cast<int>(a.size()), fmt = 1;
    expect_ok(PQexecPrepared(c_, "many", 1, &v, &len, &fmt, 0), "insert batch");
  }
  // The floor of a batch: the leases (no flush awaited), then their completion.
  void floor(const std::vector<std::string>& ids, std::size_t from, std::size_t n) {
    const std::string a = bytea_array(ids, from, n);
    const char* v = a.data();
    const int len = static_cast<int>(a.size()), fmt = 1;
    expect_ok(PQexecPrepared(c_, "floor_claim", 1, &v, &len, &fmt, 0), "floor claim");
    expect_ok(PQexecPrepared(c_, "floor_commit", 1, &v, &len, &fmt, 0), "floor commit");
  }
  void pipelined(const std::vector<std::string>& ids, std::size_t from, std::size_t n) {
    if (PQenterPipelineMode(c_) != 1) die("pipeline mode");
    for (std::size_t i = from; i < from + n; ++i) {
      const char* v = ids[i].data();
      const int len = static_cast<int>(ids[i].size()), fmt = 1;
      if (PQsendQueryPrepared(c_, "one", 1, &v, &len, &fmt, 0) != 1) die("send");
    }
    PQpipelineSync(c_);
    std::size_t results = 0;
    while (results < n) {
      PGresult* r = PQgetResult(c_);
      if (r == nullptr) continue;  // the end of one query's results
      expect_ok(r, "pipelined insert");
      ++results;
    }
    PGresult* sync = PQgetResult(c_);
    while (sync == nullptr) sync = PQgetResult(c_);  // past the last query's end
    if (PQresultStatus(sync) != PGRES_PIPELINE_SYNC) die("pipeline sync");
    PQclear(sync);
    if (PQexitPipelineMode(c_) != 1) die(std::string("exit pipeline: ") + PQerrorMessage(c_));
  }

 private:
  PGconn* c_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Bench {
  Config cfg;
  std::shared_ptr<idem::Store> store;
  Raw* raw;
  int run = 0;

  // One round of one path on fresh ids: messages per second.
  double rate(std::size_t n, const std::function<void(const std::vector<std::string>&)>& path) {
    const auto ids = ids_for(std::to_string(run++), n);
    return static_cast<double>(n) / seconds_of([&] { path(ids); });
  }

  void idem_seq(const std::vector<std::string>& ids) {
    const idem::TimePoint now = idem::from_unix_ms(1'700'000'000'000);
    for (const auto& id : ids) {
      auto c = store->claim(ClaimRequest{id, "bench", Duration(30'000), std::nullopt, now});
      if (!c.ok() || c->status != ClaimStatus::kNew) die("claim " + id);
      CommitRequest q{id, "bench", std::nullopt, now, Duration(600'000)};
      if (!store->commit(q).ok()) die("commit " + id);
    }
  }

  void idem_batch(const std::vector<std::string>& ids) {
    const idem::TimePoint now = idem::from_unix_ms(1'700'000'000'000);
    std::vector<ClaimRequest> claims;
    std::vector<CommitRequest> commits;
    for (std::size_t from = 0; from < ids.size(); from += cfg.batch) {
      const std::size_t n = std::min(cfg.batch, ids.size() - from);
      claims.clear();
      commits.clear();
      for (std::size_t i = from; i < from + n; ++i) {
        claims.push_back(ClaimRequest{ids[i], "bench", Duration(30'000), std::nullopt, now});
        commits.push_back(CommitRequest{ids[i], "bench", std::nullopt, now, Duration(600'000)});
      }
      for (const auto& c : store->claim_batch(claims))
        if (!c.ok() || c->status != ClaimStatus::kNew) die("claim_batch");
      for (const auto& s : store->commit_batch(commits))
        if (!s.ok()) die("commit_batch: " + s.to_string());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"idem::postgres vs raw PostgreSQL inserts on the same server"};
  app.add_option("--messages", cfg.messages, "messages per sequential path and repeat");
  app.add_option("--batch-messages", cfg.batch_messages, "messages per batched path and repeat");
  app.add_option("--batch", cfg.batch, "messages per batch");
  app.add_option("--repeat", cfg.repeat, "rounds (medians are printed)");
  app.add_option("--conninfo", cfg.conninfo, "libpq connection string of a running server (default: start one)");
  app.add_flag("--strict", cfg.strict, "exit 3 when a target is missed");
  CLI11_PARSE(app, argc, argv);
  if (cfg.batch == 0 || cfg.repeat <= 0) die("--batch and --repeat must be > 0");

#ifdef IDEM_BENCH_SPAWN_POSTGRES
  std::unique_ptr<idem::postgres_test::PostgresServer> server;
  if (cfg.conninfo.empty()) {
    auto s = idem::postgres_test::PostgresServer::start({.fsync = true});
    if (!s.ok()) die(s.status().to_string());
    server = std::move(s).value();
    cfg.conninfo = "host=127.0.0.1 user=idem dbname=postgres port=" + std::to_string(server->port());
  }
#endif
  if (cfg.conninfo.empty()) die("--conninfo is required (this build cannot start a server)");

  Raw raw(cfg.conninfo);
  idem::postgres::Options o;
  PQconninfoOption* parsed = PQconninfoParse(cfg.conninfo.c_str(), nullptr);
  if (parsed == nullptr) die("bad --conninfo");
  for (PQconninfoOption* p = parsed; p->keyword != nullptr; ++p)
    if (p->val != nullptr) o.connection.emplace_back(p->keyword, p->val);
  PQconninfoFree(parsed);
  o.schema = "bench_idem";
  o.pool_size = 1;
  auto store = idem::postgres::open(o);
  if (!store.ok()) die(store.status().to_string());

  Bench b{cfg, *store, &raw};
  auto batched = [&](void (Raw::*f)(const std::vector<std::string>&, std::size_t, std::size_t)) {
    return [&, f](const std::vector<std::string>& ids) {
      for (std::size_t from = 0; from < ids.size(); from += cfg.batch)
        (raw.*f)(ids, from, std::min(cfg.batch, ids.size() - from));
    };
  };
  // The paths run interleaved, round by round, so that a slow spell of the machine
  // hits every path alike; the ratios are the medians of each round's ratio.
  std::vector<double> raw_seqs, idem_seqs, raw_batches, raw_pipes, idem_batches, floor_batches, seq_ratios,
      batch_ratios, pipe_ratios, floor_ratios;
  for (int r = 0; r < cfg.repeat; ++r) {
    raw_seqs.push_back(b.rate(cfg.messages, [&](const auto& ids) {
      for (const auto& id : ids) raw.one(id);
    }));
    idem_seqs.push_back(b.rate(cfg.messages, [&](const auto& ids) { b.idem_seq(ids); }));
    raw_batches.push_back(b.rate(cfg.batch_messages, batched(&Raw::many)));
    raw_pipes.push_back(b.rate(cfg.batch_messages, batched(&Raw::pipelined)));
    idem_batches.push_back(b.rate(cfg.batch_messages, [&](const auto& ids) { b.idem_batch(ids); }));
    floor_batches.push_back(b.rate(cfg.batch_messages, batched(&Raw::floor)));
    seq_ratios.push_back(idem_seqs.back() / raw_seqs.back());
    batch_ratios.push_back(idem_batches.back() / raw_batches.back());
    pipe_ratios.push_back(raw_pipes.back() / raw_batches.back());
    floor_ratios.push_back(floor_batches.back() / raw_batches.back());
  }
  const double raw_seq = median(raw_seqs), idem_seq = median(idem_seqs), raw_batch = median(raw_batches),
               raw_pipe = median(raw_pipes), idem_batch = median(idem_batches), floor_batch = median(floor_batches);

  std::printf("%-18s %12s\n", "path", "msgs/s");
  std::printf("%-18s %12.0f\n", "raw_seq_insert", raw_seq);
  std::printf("%-18s %12.0f\n", "idem_seq", idem_seq);
  std::printf("%-18s %12.0f   (batch %zu)\n", "raw_batch_insert", raw_batch, cfg.batch);
  std::printf("%-18s %12.0f\n", "raw_pipe_insert", raw_pipe);
  std::printf("%-18s %12.0f\n", "idem_batch", idem_batch);
  std::printf("%-18s %12.0f\n", "floor_batch", floor_batch);
  const double seq = median(seq_ratios), batch = median(batch_ratios);
  std::printf("ratio idem_seq / raw_seq_insert     %.2f (target >= 0.5) %s\n", seq, seq >= 0.5 ? "PASS" : "FAIL");
  std::printf("ratio idem_batch / raw_batch_insert %.2f (target >= 0.5) %s\n", batch, batch >= 0.5 ? "PASS" : "FAIL");
  std::printf("ratio floor_batch / raw_batch_insert %.2f (the most idem_batch can reach)\n", median(floor_ratios));
  std::printf("ratio raw_pipe / raw_batch_insert   %.2f (pipeline mode vs arrays)\n", median(pipe_ratios));
  return cfg.strict && (seq < 0.5 || batch < 0.5) ? 3 : 0;
}
