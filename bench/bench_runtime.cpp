// idem_bench_runtime: what the consumer runtime costs, in one run.
//
// Memory rows (no broker): the same stream of unique ids through Consumer::process on
// one thread (`consumer`), and through the runtime over an in-memory source with one
// worker (`runtime_1w`); then a 20 µs CPU-bound handler with one and two workers
// (`cpu20_1w`, `cpu20_2w`).
//
// SQLite rows (no broker): one SQLite transaction per message writing a dedup row and
// an effect row (`sqlite_txn_floor`: the floor of a per-message transactional commit);
// one transaction per batch with a savepoint, lookup, dedup row and effect row per
// message (`sqlite_batch_floor`: the floor of a transactional batch); and idem's
// runtime over an in-memory source holding the broker rows' messages, with the
// transactional SQLite consumer every broker row uses (`idem_no_broker`: the engine's
// floor for those rows).
//
// Per broker, when its adapter is built and not skipped, a server this program starts
// on 127.0.0.1 (Kafka and Pulsar through scripts/broker.sh), the same messages in a
// stream, queue or topic per row:
//   plain_<broker>  the broker's client library alone: fetch a batch, no-op, ack it;
//                   nothing durable, no dedup
//   idem_<broker>   idem's runtime with that broker's source and the transactional
//                   SQLite consumer (its handler inserts one effect row), 2 workers,
//                   batch b
// where <broker> is `stream` (Redis Streams: XREADGROUP COUNT b + one XACK per batch;
// also `naive_stream`, the same loop checking, handling and inserting each id in
// SQLite autocommit), `amqp` (RabbitMQ: basic.consume with the source's prefetch, one
// basic.ack with `multiple` per batch; also `plain_amqp_tx`, the same in tx.select
// waiting for a tx.commit after each ack, and `batched_amqp`, the hand-written batch
// consumer: the plain loop writing each batch as sqlite_batch_floor does, in one
// thread, before its ack), `nats` (a durable pull consumer, Fetch(b),
// an Ack per message), `kafka` (a group member, poll b, one asynchronous commit per
// batch) and `pulsar` (the WebSocket API, a permit for b, an ack per message). The
// Kafka and Pulsar rows are timed from their first message.
//
// Workers curve (a redis-server of its own; --no-curve skips it): a handler that sleeps
// 1 ms over Redis Streams with the Redis store, W = 1, 2, 4, 8, 16 workers
// (`sleep1ms_w<W>`, W × 600 messages each), two consumers of one group with 8 workers
// each (`sleep1ms_w8_x2`), and the same handler on SQLite in transactional mode with 1
// and 8 workers (`sqlite_sleep1ms_w<W>`); with the Kafka rows, the same handler over
// a topic of 16 partitions with the memory store, W = 1, 4, 8, 16
// (`kafka_sleep1ms_w<W>`).
//
// Targets: runtime_1w ≥ 0.8 × consumer; cpu20_2w ≥ 1.7 × cpu20_1w; and for each broker
// idem ≥ 0.7 × its plain loop, or ≥ 0.9 × sqlite_batch_floor (the plain loop writes
// nothing durable and can outrun what SQLite commits); sleep1ms_w<W> ≥ 0.8 × W ×
// sleep1ms_w1 (and on Kafka alike) and sleep1ms_w8_x2 ≥ 1.7 × sleep1ms_w8. The other ratios are printed
// without a target.
//
// Exit status: 0; 3 with --strict when a target failed; 2 when the run cannot go on.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench_util.hpp"
#include "idem/memory_store.hpp"
#include "idem/runtime.hpp"
#include "runtime_rows.hpp"
#include "vector_source.hpp"

namespace idem::bench {
namespace {

std::vector<std::string> make_ids(std::size_t n, const std::string& prefix) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i * 7919 % n));
  return ids;
}

void spin(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

ConsumerOptions memory_options() {
  ConsumerOptions o;
  memory::Options mo;
  mo.max_records = 4'000'000;
  o.store = memory::open(mo).value();
  o.latency_metrics = false;
  return o;
}

double consumer_alone(const std::vector<std::string>& ids) {
  auto c = Consumer<Msg>::create(memory_options(), extractors(),
                                 [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  std::vector<Msg> msgs;
  for (const auto& id : ids) msgs.push_back({id});
  const auto t0 = Clock::now();
  for (const Msg& m : msgs) (void)c->process(m);
  return rate(ids.size(), Clock::now() - t0);
}

double runtime_over(const std::vector<std::string>& ids, std::size_t workers, std::chrono::microseconds work) {
  auto c = Consumer<Msg>::create(memory_options(), extractors(), [work](const Msg&, HandlerContext&) {
    if (work.count() > 0) spin(work);
    return HandlerResult::ok();
  });
  VectorSource src(ids);
  RuntimeOptions ro;
  ro.workers = workers;
  ro.max_messages = ids.size();
  auto rt = Runtime<Msg>::create(ro, src, *c, decode).value();
  const auto t0 = Clock::now();
  (void)rt->run();
  const auto took = Clock::now() - t0;
  if (src.acked() != ids.size()) std::fprintf(stderr, "runtime acked %zu of %zu\n", src.acked(), ids.size());
  return rate(ids.size(), took);
}

// The broker rows' idem path without a broker: the runtime over n bodies as the broker
// rows publish them, with the same transactional SQLite consumer (the engine's floor).
double idem_no_broker(std::size_t n, std::size_t batch, const std::string& db) {
  std::vector<std::string> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back("msg-" + std::to_string(i));
  VectorSource src(std::move(bodies));
  return idem_rate(src, n, batch, db);
}

// row / base ≥ min, or (when or_base is set) row / or_base ≥ or_min.
struct Target {
  std::string row, base;
  double min;
  std::string or_base = {};
  double or_min = 0;
};

// The workers curve's targets: W workers ≥ 0.8 × W × one worker, two consumers ≥ 1.7 ×
// one; SQLite's rows are printed as its documented floor.
void curve_targets(std::vector<Target>& targets) {
  for (int w : {2, 4, 8, 16}) targets.push_back({"sleep1ms_w" + std::to_string(w), "sleep1ms_w1", 0.8 * w});
  targets.push_back({"sleep1ms_w8_x2", "sleep1ms_w8", 1.7});
  targets.push_back({"sqlite_sleep1ms_w8", "sqlite_sleep1ms_w1", 0.0});
}

// Per broker, idem's CPU per message (all processes: client, broker, SQLite) against
// its two parts run alone, the plain loop and SQLite's batch floor, and how busy the
// machine was: near 100%, the row is bound by the machine's CPUs, and only fewer
// instructions per message make it faster.
void print_cpu_split(const std::vector<std::string>& brokers, std::map<std::string, MachineCpu>& cpu_of) {
  const MachineCpu floor = cpu_of["sqlite_batch_floor"];
  for (const std::string& b : brokers) {
    const MachineCpu idem = cpu_of["idem_" + b], plain = cpu_of["plain_" + b];
    if (idem.us_per_msg <= 0) continue;
    std::printf("idem_%s cpu: %.2f us/msg (machine %.0f%% busy) = plain_%s %.2f + sqlite_batch_floor %.2f %+.2f\n",
                b.c_str(), idem.us_per_msg, 100 * idem.busy, b.c_str(), plain.us_per_msg, floor.us_per_msg,
                idem.us_per_msg - plain.us_per_msg - floor.us_per_msg);
  }
}

int run(std::size_t n, std::size_t cpu_n, std::size_t stream_n, std::size_t batch, bool strict, bool redis, bool amqp,
        bool nats, bool kafka, bool pulsar, bool curve) {
  start_cpu_sampler();
  std::vector<Row> rows;
  const auto ids = make_ids(n, "orders-");
  rows.push_back({"consumer", "Consumer::process, memory store, no-op, 1 thread", consumer_alone(ids)});
  rows.push_back({"runtime_1w", "runtime, in-memory source, 1 worker, no-op", runtime_over(ids, 1, {})});
  const auto cpu_ids = make_ids(cpu_n, "cpu-");
  rows.push_back(
      {"cpu20_1w", "runtime, 20 us CPU handler, 1 worker", runtime_over(cpu_ids, 1, std::chrono::microseconds(20))});
  rows.push_back(
      {"cpu20_2w", "runtime, 20 us CPU handler, 2 workers", runtime_over(cpu_ids, 2, std::chrono::microseconds(20))});
  std::vector<Target> targets = {{"runtime_1w", "consumer", 0.8}, {"cpu20_2w", "cpu20_1w", 1.7}};
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-runtime-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  sqlite_rows(stream_n, batch, dir.string(), rows);
  rows.push_back({"idem_no_broker", "runtime over an in-memory source, SQLite transactional, 2 workers, batch b",
                  idem_no_broker(stream_n, batch, (dir / "engine.db").string())});
  std::filesystem::remove_all(dir);
  targets.push_back({"idem_no_broker", "sqlite_batch_floor", 0.0});
  // Each broker: idem ≥ 0.7 × its plain loop, or ≥ 0.9 × SQLite's batch floor where the
  // plain loop outruns what SQLite commits.
  std::vector<std::string> brokers;
  auto broker = [&](const std::string& name) {
    targets.push_back({"idem_" + name, "plain_" + name, 0.7, "sqlite_batch_floor", 0.9});
    brokers.push_back(name);
  };
  if (redis) {
    if (!stream_rows(stream_n, batch, rows)) return 2;
    broker("stream");
    targets.push_back({"idem_stream", "naive_stream", 0.0});
    targets.push_back({"idem_stream", "sqlite_txn_floor", 0.0});
  }
  if (curve) {
    if (!workers_rows(rows)) return 2;
    curve_targets(targets);
  }
#ifdef IDEM_BENCH_WITH_RABBITMQ
  if (amqp) {
    if (!rabbitmq_rows(stream_n, batch, rows)) return 2;
    broker("amqp");
    targets.push_back({"idem_amqp", "batched_amqp", 0.0});
    targets.push_back({"plain_amqp_tx", "plain_amqp", 0.0});
  }
#else
  (void)amqp;
#endif
#ifdef IDEM_BENCH_WITH_NATS
  if (nats) {
    if (!nats_rows(stream_n, batch, rows)) return 2;
    broker("nats");
  }
#else
  (void)nats;
#endif
#ifdef IDEM_BENCH_WITH_KAFKA
  if (kafka) {
    if (!kafka_rows(stream_n, batch, curve, rows)) return 2;
    broker("kafka");
    if (curve) {
      for (int w : {4, 8, 16})
        targets.push_back({"kafka_sleep1ms_w" + std::to_string(w), "kafka_sleep1ms_w1", 0.8 * w});
    }
  }
#else
  (void)kafka;
#endif
#ifdef IDEM_BENCH_WITH_PULSAR
  if (pulsar) {
    if (!pulsar_rows(stream_n, batch, rows)) return 2;
    broker("pulsar");
  }
#else
  (void)pulsar;
#endif
  std::map<std::string, double> by_name;
  std::map<std::string, MachineCpu> cpu_of;
  std::printf("%-18s %14s %10s %5s  %s\n", "row", "msgs/s", "cpu_us/msg", "busy", "what");
  for (const Row& r : rows) {
    by_name[r.name] = r.msgs_per_s;
    cpu_of[r.name] = r.cpu;
    std::printf("%-18s %14s %10.2f %4.0f%%  %s\n", r.name.c_str(), with_commas(r.msgs_per_s).c_str(),
                r.cpu.us_per_msg, 100 * r.cpu.busy, r.what.c_str());
  }
  bool ok = true;
  for (const Target& t : targets) {
    const double ratio = by_name[t.row] / by_name[t.base];
    const double or_ratio = t.or_base.empty() ? 0 : by_name[t.row] / by_name[t.or_base];
    const bool pass = ratio >= t.min || (!t.or_base.empty() && or_ratio >= t.or_min);
    ok = ok && pass;
    if (!t.or_base.empty()) {
      std::printf("%s / %s = %.2f, / %s = %.2f (target >= %.2f or >= %.2f) %s\n", t.row.c_str(), t.base.c_str(),
                  ratio, t.or_base.c_str(), or_ratio, t.min, t.or_min, pass ? "PASS" : "FAIL");
    } else if (t.min > 0) {
      std::printf("%s / %s = %.2f (target >= %.2f) %s\n", t.row.c_str(), t.base.c_str(), ratio, t.min,
                  pass ? "PASS" : "FAIL");
    } else {
      std::printf("%s / %s = %.2f\n", t.row.c_str(), t.base.c_str(), ratio);
    }
  }
  print_cpu_split(brokers, cpu_of);
  return strict && !ok ? 3 : 0;
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) {
  CLI::App app("idem_bench_runtime: the consumer runtime against Consumer::process and a plain stream loop");
  std::size_t n = 1'000'000, cpu_n = 50'000, stream_n = 100'000, batch = 100;
  bool strict = false, no_redis = false, no_amqp = false, no_nats = false, no_kafka = false, no_pulsar = false,
       no_curve = false;
  app.add_option("--messages", n, "Messages of the memory rows")->capture_default_str();
  app.add_option("--cpu-messages", cpu_n, "Messages of the 20 us handler rows")->capture_default_str();
  app.add_option("--stream-messages", stream_n, "Messages of the Redis Streams, RabbitMQ and NATS rows")
      ->capture_default_str();
  app.add_option("--batch", batch, "Batch of the stream rows (XREADGROUP COUNT, process_batch)")->capture_default_str();
  app.add_flag("--strict", strict, "exit 3 if a target fails");
  app.add_flag("--no-redis", no_redis, "skip the Redis Streams rows");
  app.add_flag("--no-amqp", no_amqp, "skip the RabbitMQ rows");
  app.add_flag("--no-nats", no_nats, "skip the NATS JetStream rows");
  app.add_flag("--no-kafka", no_kafka, "skip the Kafka rows");
  app.add_flag("--no-pulsar", no_pulsar, "skip the Pulsar rows");
  app.add_flag("--no-curve", no_curve, "skip the workers curve (a 1 ms handler, 1 to 16 workers)");
  CLI11_PARSE(app, argc, argv);
  return idem::bench::run(n, cpu_n, stream_n, batch, strict, !no_redis, !no_amqp, !no_nats, !no_kafka, !no_pulsar,
                          !no_curve);
}
