// idem::redis against raw Redis primitives on the same server, in one run:
//   raw_seq_setnx      one SET key 1 NX PX per message, one round trip each
//   idem_seq_naive     claim, no-op handler, commit: two round trips per message
//   idem_seq_overlap   commit_then_claim: the commit of message n and the claim of
//                      message n+1 in one round trip (one script on one node)
//   consumer_lookahead the whole Consumer (claim, no-op handler, commit) over the
//                      store, sequential, with process(m, next): m's commit and
//                      next's claim in one round trip
//   consumer_plain     the same Consumer with process(m): two round trips
//   raw_pipe_setnx     SET NX PX pipelined, --batch per round trip
//   idem_batch         claim_batch + commit_batch per --batch messages
//   floor_seq_cas      the least Redis 7.0 allows for one sequential message with an
//                      owner-checked commit: one round trip carrying a minimal Lua
//                      commit (SET … GET, then a prefix compare) and the next SET NX PX,
//                      raw hiredict, no record encoding
//   floor_batch_cas    the same per --batch messages: the SET NX PX pipelined, then
//                      one minimal Lua script committing them all (two round trips,
//                      as idem_batch)
// and the same idem paths on a 3-master cluster vs the single node, with the batch
// floor on both: on a cluster a script may only touch keys of one slot, so the floor
// commits with one script per slot group (nearly one per message), every master
// sent to before any is read. Redis 7.0 has no
// compare-and-set command (SET IFEQ came in 8.4), so a commit that must check its
// owner runs a script; the floor rows show what that costs before idem adds anything.
// By default the bench starts its own servers (redis-server on 127.0.0.1, free ports)
// and pins itself and them to one CPU (--cpu), so that every path pays the same
// loopback scheduling; --uri / --cluster-uri use running servers instead.
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cluster/slot_map.hpp"
#include "connection.hpp"
#include "idem/consumer.hpp"
#include "idem/redis_store.hpp"
#ifdef IDEM_BENCH_SPAWN_REDIS
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#endif

namespace {

using idem::ClaimRequest;
using idem::ClaimStatus;
using idem::CommitRequest;
using idem::Duration;
using Clock = std::chrono::steady_clock;

struct Config {
  std::size_t messages = 20'000;  // per sequential path
  std::size_t batch_messages = 200'000;
  std::size_t batch = 100;
  int repeat = 3;
  int cpu = 0;
  std::string uri;
  std::string cluster_uri;
  bool cluster = true;
};

struct Row {
  std::string name;
  double rate = 0;  // messages per second (median of the repeats)
};

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

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_redis: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<idem::redis::detail::Connection> raw_connection(const idem::redis::Options& o) {
  idem::redis::detail::ConnectOptions co;
  co.password = o.password;
  co.user = o.user;
  co.db = o.db;
  co.command_timeout = Duration(10'000);
  auto c = idem::redis::detail::Connection::open(o.endpoints.front(), co);
  if (!c.ok()) die(c.status().to_string());
  return std::move(c).value();
}

idem::redis::Options options_of(const std::string& uri) {
  auto u = idem::StoreUri::parse(uri);
  if (!u.ok()) die(u.status().to_string());
  auto o = idem::redis::parse_uri(*u);
  if (!o.ok()) die(o.status().to_string());
  o->command_timeout = Duration(10'000);
  o->prefix = "bench:";
  return *o;
}

std::shared_ptr<idem::Store> store_of(const idem::redis::Options& o) {
  auto s = idem::redis::open(o);
  if (!s.ok()) die(s.status().to_string());
  return std::move(s).value();
}

const Duration kLease{30'000};
const std::size_t kSeqChunk = 500;    // messages per interleaved chunk, sequential paths
const std::size_t kBatChunk = 5'000;  // messages per interleaved chunk, batched paths
const Duration kTtl{600'000};

CommitRequest commit_of(const std::string& id, idem::TimePoint now) {
  CommitRequest c;
  c.id = id;
  c.owner = "bench";
  c.now = now;
  c.ttl = kTtl;
  return c;
}

void expect_new(const idem::StatusOr<idem::ClaimResult>& c) {
  if (!c.ok()) die(c.status().to_string());
  if (c->status != ClaimStatus::kNew) die("a fresh id was not new");
}
void expect_ok(const idem::Status& s) {
  if (!s.ok()) die(s.to_string());
}

// The floor rows' commit: KEYS the records; ARGV px, the owner's lease prefix, then one
// value per key. Writes each value, checking that the old one was absent or this
// owner's lease (the check idem's commit makes); answers one byte per key.
const char* const kFloorCommit = R"lua(
local codes = {}
for i, k in ipairs(KEYS) do
  local old = redis.call('SET', k, ARGV[2 + i], 'PX', ARGV[1], 'GET')
  codes[i] = (not old or string.sub(old, 1, #ARGV[2]) == ARGV[2]) and '0' or '2'
end
return table.concat(codes)
)lua";
const std::string kFloorLease = "i:bench-lease-0000000000000000";  // about idem's sizes
const std::string kFloorDone = "c:bench-done-00000000000000000000";

std::string load_floor_script(idem::redis::detail::Connection& c) {
  auto r = c.call({"SCRIPT", "LOAD", kFloorCommit});
  if (!r.ok() || r->type != idem::redis::detail::Reply::Type::kString) die("SCRIPT LOAD failed");
  return r->str;
}

void expect_committed(const idem::StatusOr<idem::redis::detail::Reply>& r, std::size_t n) {
  if (!r.ok() || r->type != idem::redis::detail::Reply::Type::kString || r->str != std::string(n, '0'))
    die("floor commit failed");
}

void floor_seq(idem::redis::detail::Connection& c, const std::string& sha, const std::vector<std::string>& ids) {
  const std::string px = std::to_string(kTtl.count()), lease_px = std::to_string(kLease.count());
  auto claim = [&](const std::string& id) {
    c.append({"SET", "floor:{" + id + "}", kFloorLease, "NX", "PX", lease_px});
  };
  claim(ids.front());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) expect_committed(c.read(), 1);
    auto granted = c.read();
    if (!granted.ok() || granted->is_error()) die("floor claim failed");
    c.append({"EVALSHA", sha, "1", "floor:{" + ids[i] + "}", px, "i", kFloorDone});
    if (i + 1 < ids.size()) claim(ids[i + 1]);
  }
  expect_committed(c.read(), 1);
}

void floor_batch(idem::redis::detail::Connection& c, const std::string& sha, const std::vector<std::string>& ids,
                 std::size_t batch) {
  const std::string px = std::to_string(kTtl.count()), lease_px = std::to_string(kLease.count());
  for (std::size_t i = 0; i < ids.size(); i += batch) {
    const std::size_t end = std::min(ids.size(), i + batch);
    for (std::size_t k = i; k < end; ++k)
      c.append({"SET", "floor:{" + ids[k] + "}", kFloorLease, "NX", "PX", lease_px});
    for (std::size_t k = i; k < end; ++k) {
      auto r = c.read();
      if (!r.ok() || r->is_error()) die("floor claim failed");
    }
    std::vector<std::string> argv = {"EVALSHA", sha, std::to_string(end - i)};
    for (std::size_t k = i; k < end; ++k) argv.push_back("floor:{" + ids[k] + "}");
    argv.push_back(px);
    argv.push_back("i");
    for (std::size_t k = i; k < end; ++k) argv.push_back(kFloorDone);
    expect_committed(c.call(argv), end - i);
  }
}

// Raw connections to every master of a cluster, routed by slot, each with the floor
// script loaded.
struct ClusterFloor {
  idem::redis::detail::SlotMap map;
  std::map<std::string, std::unique_ptr<idem::redis::detail::Connection>> masters;
  std::string sha;
  idem::redis::detail::Connection& of(const std::string& key) {
    auto at = map.master_of(idem::redis::detail::key_slot(key));
    if (!at) die("no master serves " + key);
    return *masters.at(idem::redis::detail::to_string(*at));
  }
};

ClusterFloor cluster_floor(const idem::redis::Options& o) {
  auto seed = raw_connection(o);
  auto slots = seed->call({"CLUSTER", "SLOTS"});
  if (!slots.ok()) die("CLUSTER SLOTS failed");
  auto map = idem::redis::detail::SlotMap::parse(*slots, o.endpoints.front());
  if (!map.ok()) die(map.status().to_string());
  ClusterFloor f{std::move(map).value(), {}, {}};
  for (int slot = 0; slot < idem::redis::detail::kSlotCount; ++slot) {
    auto at = f.map.master_of(slot);
    if (!at || f.masters.count(idem::redis::detail::to_string(*at))) continue;
    idem::redis::Options one = o;
    one.endpoints = {*at};
    auto c = raw_connection(one);
    f.sha = load_floor_script(*c);
    f.masters[idem::redis::detail::to_string(*at)] = std::move(c);
  }
  return f;
}

// floor_batch on a cluster: the same two round trips (every master written to before
// any is read), the commit as one script per key.
void floor_batch_cluster(ClusterFloor& f, const std::vector<std::string>& ids, std::size_t batch) {
  const std::string px = std::to_string(kTtl.count()), lease_px = std::to_string(kLease.count());
  std::vector<std::pair<idem::redis::detail::Connection*, std::string>> sent;
  auto round = [&](auto&& append, auto&& check) {
    for (auto& [c, key] : sent) append(*c, key);
    for (auto& [addr, c] : f.masters) c->flush();
    for (auto& [c, key] : sent) check(c->read());
  };
  for (std::size_t i = 0; i < ids.size(); i += batch) {
    sent.clear();
    for (std::size_t k = i; k < std::min(ids.size(), i + batch); ++k) {
      std::string key = "floor:{" + ids[k] + "}";
      sent.emplace_back(&f.of(key), std::move(key));
    }
    round([&](auto& c, const std::string& key) { c.append({"SET", key, kFloorLease, "NX", "PX", lease_px}); },
          [](const auto& r) {
            if (!r.ok() || r->is_error()) die("floor claim failed");
          });
    round([&](auto& c, const std::string& key) { c.append({"EVALSHA", f.sha, "1", key, px, "i", kFloorDone}); },
          [](const auto& r) { expect_committed(r, 1); });
  }
}

// One measured run of `path` over n fresh ids; returns messages per second.
using Path = std::function<void(const std::vector<std::string>&)>;

void raw_seq(idem::redis::detail::Connection& c, const std::vector<std::string>& ids) {
  const std::string px = std::to_string(kTtl.count());
  for (const auto& id : ids) {
    auto r = c.call({"SET", "raw:{" + id + "}", "1", "NX", "PX", px});
    if (!r.ok() || r->is_error()) die("raw SET failed");
  }
}

void raw_pipe(idem::redis::detail::Connection& c, const std::vector<std::string>& ids, std::size_t batch) {
  const std::string px = std::to_string(kTtl.count());
  for (std::size_t i = 0; i < ids.size(); i += batch) {
    const std::size_t end = std::min(ids.size(), i + batch);
    for (std::size_t k = i; k < end; ++k) c.append({"SET", "raw:{" + ids[k] + "}", "1", "NX", "PX", px});
    for (std::size_t k = i; k < end; ++k) {
      auto r = c.read();
      if (!r.ok() || r->is_error()) die("raw pipelined SET failed");
    }
  }
}

void idem_naive(idem::Store& s, const std::vector<std::string>& ids) {
  const idem::TimePoint now = std::chrono::system_clock::now();
  for (const auto& id : ids) {
    expect_new(s.claim({id, "bench", kLease, std::nullopt, now}));
    expect_ok(s.commit(commit_of(id, now)));
  }
}

void idem_overlap(idem::Store& s, const std::vector<std::string>& ids) {
  const idem::TimePoint now = std::chrono::system_clock::now();
  expect_new(s.claim({ids.front(), "bench", kLease, std::nullopt, now}));
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
    // (the no-op handler of ids[i] runs here)
    auto r = s.commit_then_claim(commit_of(ids[i], now), {ids[i + 1], "bench", kLease, std::nullopt, now});
    expect_ok(r.commit);
    expect_new(r.claim);
  }
  expect_ok(s.commit(commit_of(ids.back(), now)));
}

void idem_batch(idem::Store& s, const std::vector<std::string>& ids, std::size_t batch) {
  const idem::TimePoint now = std::chrono::system_clock::now();
  std::vector<ClaimRequest> claims;
  std::vector<CommitRequest> commits;
  for (std::size_t i = 0; i < ids.size(); i += batch) {
    const std::size_t end = std::min(ids.size(), i + batch);
    claims.clear();
    commits.clear();
    for (std::size_t k = i; k < end; ++k) claims.push_back({ids[k], "bench", kLease, std::nullopt, now});
    for (const auto& c : s.claim_batch(claims)) expect_new(c);
    for (std::size_t k = i; k < end; ++k) commits.push_back(commit_of(ids[k], now));
    for (const auto& st : s.commit_batch(commits)) expect_ok(st);
  }
}

using BenchConsumer = idem::Consumer<std::string>;

BenchConsumer consumer_of(std::shared_ptr<idem::Store> store) {
  idem::ConsumerOptions co;
  co.store = std::move(store);
  co.owner = "bench-consumer";
  co.lease = kLease;
  co.ttl = kTtl;
  idem::Extractors<std::string> x;
  x.id = [](const std::string& m) { return std::optional<std::string_view>(m); };
  auto c = BenchConsumer::create(co, x, [](const std::string&, idem::HandlerContext&) {
    return idem::HandlerResult::ok();  // the no-op handler
  });
  if (!c.ok()) die(c.status().to_string());
  return std::move(c).value();
}

void expect_processed(const idem::Decision& d) {
  if (d.reason != idem::Reason::kProcessed)
    die("consumer: " + std::string(idem::reason_name(d.reason)) + " " + d.detail);
}

void consumer_lookahead(BenchConsumer& c, const std::vector<std::string>& ids) {
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) expect_processed(c.process(ids[i], ids[i + 1]));
  expect_processed(c.process(ids.back()));
}

void consumer_plain(BenchConsumer& c, const std::vector<std::string>& ids) {
  for (const auto& id : ids) expect_processed(c.process(id));
}

// Runs every path on fresh ids, interleaved in chunks (path 1 chunk 1, path 2 chunk 1,
// …) so that a noisy neighbour slows every path alike; `repeat` rounds, each on fresh
// ids after `between`; reports the median rate per path.
struct PathSpec {
  std::string name;
  std::size_t messages;
  std::size_t chunk;
  Path run;
};

std::vector<Row> measure(const std::vector<PathSpec>& paths, int repeat, const std::function<void()>& between) {
  std::vector<std::vector<double>> rates(paths.size());
  for (int r = 0; r < repeat; ++r) {
    between();
    std::vector<double> secs(paths.size(), 0);
    std::size_t max_chunks = 0;
    for (const auto& p : paths) max_chunks = std::max(max_chunks, (p.messages + p.chunk - 1) / p.chunk);
    for (std::size_t c = 0; c < max_chunks; ++c) {
      for (std::size_t p = 0; p < paths.size(); ++p) {
        const std::size_t first = c * paths[p].chunk;
        if (first >= paths[p].messages) continue;
        const std::size_t n = std::min(paths[p].chunk, paths[p].messages - first);
        const auto ids = ids_for(std::to_string(r) + "-" + std::to_string(p) + "-" + std::to_string(c), n);
        secs[p] += seconds_of([&] { paths[p].run(ids); });
      }
    }
    for (std::size_t p = 0; p < paths.size(); ++p) rates[p].push_back(static_cast<double>(paths[p].messages) / secs[p]);
  }
  std::vector<Row> rows;
  for (std::size_t p = 0; p < paths.size(); ++p) {
    std::sort(rates[p].begin(), rates[p].end());
    rows.push_back({paths[p].name, rates[p][rates[p].size() / 2]});
  }
  return rows;
}

void print(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n%s\n%-28s %14s %12s\n", title.c_str(), "path", "msg/s", "us/msg");
  for (const Row& r : rows) std::printf("%-28s %14.0f %12.2f\n", r.name.c_str(), r.rate, 1e6 / r.rate);
}

// A ratio printed for reference (no target).
void note(const char* what, double ratio, const char* why) { std::printf("%-62s %6.2f  (%s)\n", what, ratio, why); }

void check(const char* what, double ratio, double target) {
  std::printf("%-62s %6.2f  (target >= %.2f) %s\n", what, ratio, target, ratio >= target ? "PASS" : "FAIL");
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"idem::redis vs raw Redis primitives"};
  app.add_option("--messages", cfg.messages, "messages per sequential path (default 20000)");
  app.add_option("--batch-messages", cfg.batch_messages, "messages per batched path (default 200000)");
  app.add_option("--batch", cfg.batch, "messages per round trip in the batched paths (default 100)");
  app.add_option("--repeat", cfg.repeat, "runs per path; the median is reported (default 3)");
  app.add_option("--cpu", cfg.cpu, "pin the bench and the servers it starts to this CPU; -1: no pinning (default 0)");
  app.add_option("--uri", cfg.uri, "use this running server instead of starting one (redis://HOST:PORT)");
  app.add_option("--cluster-uri", cfg.cluster_uri, "use this running cluster (redis://H:P,…?cluster=1)");
  app.add_flag("!--no-cluster", cfg.cluster, "skip the cluster comparison");
  CLI11_PARSE(app, argc, argv);
  if (cfg.batch == 0 || cfg.messages < 2 || cfg.repeat < 1) die("--batch, --messages and --repeat must be positive");

  if (cfg.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cfg.cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("cannot pin to CPU " + std::to_string(cfg.cpu));
  }
#ifdef IDEM_BENCH_SPAWN_REDIS
  std::unique_ptr<idem::redis_test::RedisServer> server;
  std::unique_ptr<idem::redis_test::RedisCluster> cluster;
  if (cfg.uri.empty()) {
    auto s = idem::redis_test::RedisServer::start({});  // inherits the CPU pinning
    if (!s.ok()) die(s.status().to_string());
    server = std::move(s).value();
    cfg.uri = server->uri();
  }
  if (cfg.cluster && cfg.cluster_uri.empty()) {
    auto c = idem::redis_test::RedisCluster::start(3, 0);
    if (!c.ok()) die(c.status().to_string());
    cluster = std::move(c).value();
    cfg.cluster_uri = cluster->uri();
  }
#endif
  if (cfg.uri.empty()) die("--uri is required (this build cannot start servers)");
  if (cfg.cluster && cfg.cluster_uri.empty()) die("--cluster-uri is required, or --no-cluster");

  const auto o = options_of(cfg.uri);
  auto raw = raw_connection(o);
  auto store = store_of(o);
  auto flush = [&] {
    auto r = raw->call({"FLUSHALL"});
    if (!r.ok()) die("FLUSHALL failed");
  };
  std::printf("idem::redis bench: %s, %zu sequential / %zu batched messages (batch %zu), median of %d, CPU %s\n",
              cfg.uri.c_str(), cfg.messages, cfg.batch_messages, cfg.batch, cfg.repeat,
              cfg.cpu >= 0 ? std::to_string(cfg.cpu).c_str() : "not pinned");

  const std::size_t seq = cfg.messages, bat = cfg.batch_messages, b = cfg.batch;
  const std::string floor_sha = load_floor_script(*raw);
  auto ahead = consumer_of(store);
  auto plain = consumer_of(store);
  const auto single = measure(
      {
          {"raw_seq_setnx", seq, kSeqChunk, [&](const auto& ids) { raw_seq(*raw, ids); }},
          {"idem_seq_naive (2 RTT)", seq, kSeqChunk, [&](const auto& ids) { idem_naive(*store, ids); }},
          {"idem_seq_overlap (1 RTT)", seq, kSeqChunk, [&](const auto& ids) { idem_overlap(*store, ids); }},
          {"consumer_lookahead (1 RTT)", seq, kSeqChunk, [&](const auto& ids) { consumer_lookahead(ahead, ids); }},
          {"consumer_plain (2 RTT)", seq, kSeqChunk, [&](const auto& ids) { consumer_plain(plain, ids); }},
          {"raw_pipe_setnx", bat, kBatChunk, [&](const auto& ids) { raw_pipe(*raw, ids, b); }},
          {"idem_batch", bat, kBatChunk, [&](const auto& ids) { idem_batch(*store, ids, b); }},
          {"floor_seq_cas (1 RTT)", seq, kSeqChunk, [&](const auto& ids) { floor_seq(*raw, floor_sha, ids); }},
          {"floor_batch_cas", bat, kBatChunk, [&](const auto& ids) { floor_batch(*raw, floor_sha, ids, b); }},
      },
      cfg.repeat, [&] {
        flush();
        if (load_floor_script(*raw) != floor_sha) die("SCRIPT LOAD changed");
      });
  print("single node", single);
  std::printf("\n");
  check("idem_batch / raw_pipe_setnx", single[6].rate / single[5].rate, 0.5);
  check("consumer_lookahead / raw_seq_setnx", single[3].rate / single[0].rate, 0.8);
  note("idem_seq_overlap / raw_seq_setnx", single[2].rate / single[0].rate, "the store call alone, for reference");
  note("consumer_plain / raw_seq_setnx", single[4].rate / single[0].rate, "process(m): two round trips, for reference");
  note("idem_seq_naive / raw_seq_setnx", single[1].rate / single[0].rate, "the two-round-trip path, for reference");
  note("floor_seq_cas / raw_seq_setnx", single[7].rate / single[0].rate, "Redis 7.0's floor for the sequential target");
  note("floor_batch_cas / raw_pipe_setnx", single[8].rate / single[5].rate, "Redis 7.0's floor for the batch target");
  note("consumer_lookahead / floor_seq_cas", single[3].rate / single[7].rate, "what idem adds to the floor");
  note("idem_batch / floor_batch_cas", single[6].rate / single[8].rate, "what idem adds to the floor");

  if (cfg.cluster) {
    const auto co = options_of(cfg.cluster_uri);
    auto cstore = store_of(co);
    auto cflush = [&] {
      for (const auto& e : co.endpoints) {
        idem::redis::Options one = co;
        one.endpoints = {e};
        auto c = raw_connection(one);
        auto r = c->call({"FLUSHALL"});
        if (!r.ok()) die("FLUSHALL failed");
      }
    };
    ClusterFloor cfloor = cluster_floor(co);
    const auto both = measure(
        {
            {"single: idem_seq_overlap", seq, kSeqChunk, [&](const auto& ids) { idem_overlap(*store, ids); }},
            {"cluster: idem_seq_overlap", seq, kSeqChunk, [&](const auto& ids) { idem_overlap(*cstore, ids); }},
            {"single: idem_batch", bat, kBatChunk, [&](const auto& ids) { idem_batch(*store, ids, b); }},
            {"cluster: idem_batch", bat, kBatChunk, [&](const auto& ids) { idem_batch(*cstore, ids, b); }},
            {"single: floor_batch_cas", bat, kBatChunk, [&](const auto& ids) { floor_batch(*raw, floor_sha, ids, b); }},
            {"cluster: floor_batch_cas", bat, kBatChunk,
             [&](const auto& ids) { floor_batch_cluster(cfloor, ids, b); }},
        },
        cfg.repeat, [&] {
          flush();
          cflush();
          if (load_floor_script(*raw) != floor_sha) die("SCRIPT LOAD changed");
          for (auto& [addr, c] : cfloor.masters)
            if (load_floor_script(*c) != cfloor.sha) die("SCRIPT LOAD changed");
        });
    print("single node vs 3-master cluster (same total load)", both);
    std::printf("\n");
    check("cluster/single idem_seq_overlap (cost <= 20%: >= 0.80)", both[1].rate / both[0].rate, 0.8);
    check("cluster/single idem_batch (cost <= 20%: >= 0.80)", both[3].rate / both[2].rate, 0.8);
    note("cluster/single floor_batch_cas", both[5].rate / both[4].rate, "one script per slot: the cluster's floor");
    check("cluster idem_batch / cluster floor_batch_cas", both[3].rate / both[5].rate, 0.9);
  }
  return 0;
}
