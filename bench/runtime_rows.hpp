// Shared by bench_runtime.cpp and the runtime_*_rows.cpp of each broker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/runtime.hpp"
#include "machine_cpu.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace idem::bench {

using Clock = std::chrono::steady_clock;

// One row of the table.
struct Row {
  std::string name, what;
  double msgs_per_s = 0;
  // The machine's CPU over the window of the last rate() call: the one that computed
  // msgs_per_s, when the row is built as {name, what, <a call ending in rate()>}
  // (a braced list initializes its members in order).
  MachineCpu cpu = last_window_cpu();
};

// A message whose body is its id.
struct Msg {
  std::string id;
};

inline Extractors<Msg> extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return x;
}

inline StatusOr<Msg> decode(const Delivery& d) { return Msg{d.body}; }

// n messages over d, which ended now; the window is kept for last_window_cpu().
inline double rate(std::size_t n, Clock::duration d) {
  const Clock::time_point now = Clock::now();
  note_window(now - d, now, n);
  return static_cast<double>(n) / std::chrono::duration<double>(d).count();
}

// A SQLite file (WAL, synchronous=NORMAL) with the tables `effects` and `seen`.
struct BenchDb {
  explicit BenchDb(const std::string& path);
  ~BenchDb();
  BenchDb(const BenchDb&) = delete;
  BenchDb& operator=(const BenchDb&) = delete;
  // Runs `sql` with ?1 bound to id.
  void exec_id(const char* sql, const std::string& id);
  // True iff `seen` holds id.
  bool seen(const std::string& id);
  sqlite3* db = nullptr;
};

// What a hand-written transactional batch consumer writes (sqlite_batch_floor's
// statements, prepared once): begin(), per message add(id) (a savepoint, the dedup
// lookup, then the effect row and the dedup row unless the id was seen), commit().
class BatchWriter {
 public:
  explicit BatchWriter(const std::string& path);
  ~BatchWriter();
  void begin();
  void add(std::string_view id);
  void commit();

 private:
  BenchDb d_;
  sqlite3_stmt *find_ = nullptr, *seen_ = nullptr, *effect_ = nullptr;
};

// Appends the rows sqlite_txn_floor and sqlite_batch_floor over n messages (SQLite
// alone, files in `dir`): the floors every broker's idem row is compared with.
void sqlite_rows(std::size_t n, std::size_t batch, const std::string& dir, std::vector<Row>& rows);

// idem's runtime over `source` with a transactional SQLite consumer (its file `db`)
// whose handler inserts one effect row, prepared once: 2 workers, batch b, until n
// deliveries are decided. Returns msgs/s; closes the source, inside the timing when
// `close_timed` (a source whose close flushes its last acks).
double idem_rate(MessageSource& source, std::size_t n, std::size_t batch, const std::string& db,
                 bool close_timed = false);

// Starts a redis-server on 127.0.0.1 and appends the rows plain_stream, naive_stream
// and idem_stream over n messages. Returns false (after saying why on stderr) when the
// run cannot go on.
bool stream_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows);

// The runtime with `workers` workers over `source` and a consumer of `store` whose
// handler sleeps 1 ms (one waiting on I/O), until it decided n deliveries; counts the
// handler's runs into *calls unless null. Returns msgs/s; closes the source.
double sleeping_rate(MessageSource& source, std::shared_ptr<Store> store, bool transactional, std::size_t workers,
                     std::size_t n, std::atomic<std::size_t>* calls);

// Starts a redis-server on 127.0.0.1 and appends the workers curve's rows
// (runtime_workers_rows.cpp). Returns false (after saying why on stderr) when the run
// cannot go on.
bool workers_rows(std::vector<Row>& rows);

// Starts a private RabbitMQ node and appends the rows plain_amqp, plain_amqp_tx and
// idem_amqp over n messages. Built when the RabbitMQ adapter is
// (IDEM_BENCH_WITH_RABBITMQ). Returns false (after saying why on stderr) when the run
// cannot go on.
bool rabbitmq_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows);

// Starts a nats-server with JetStream on 127.0.0.1 and appends the rows plain_nats and
// idem_nats over n messages (runtime_nats_rows.cpp, built when the NATS adapter is).
// Returns false (after saying why on stderr) when the run cannot go on.
bool nats_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows);

// Starts a Kafka broker (scripts/broker.sh) and appends the rows plain_kafka and
// idem_kafka over n messages, then with `curve` the workers curve on Kafka
// (kafka_sleep1ms_w<W>) (runtime_kafka_rows.cpp, built when the Kafka adapter is).
// Returns false (after saying why on stderr) when the run cannot go on.
bool kafka_rows(std::size_t n, std::size_t batch, bool curve, std::vector<Row>& rows);

// Starts a Pulsar standalone (scripts/broker.sh) and appends the rows plain_pulsar and
// idem_pulsar over n messages (runtime_pulsar_rows.cpp, built when the Pulsar adapter
// is). Returns false (after saying why on stderr) when the run cannot go on.
bool pulsar_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows);

}  // namespace idem::bench
