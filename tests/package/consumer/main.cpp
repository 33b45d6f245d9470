// Uses an installed idem: with idem::stores, a consumer on memory: (and on sqlite:,
// rocksdb: and bloom+rocksdb: when installed) must process one message and answer a
// duplicate;
// every other component installed is called once through its public header, the
// client types they expose (sqlite3*, PGconn*) included.
#include <idem/idem.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#ifdef HAVE_IDEM_SQLITE
#include <idem/sqlite_store.hpp>
#include <sqlite3.h>
#endif
#ifdef HAVE_IDEM_POSTGRES
#include <idem/postgres_store.hpp>
#include <libpq-fe.h>
#endif
#ifdef HAVE_IDEM_REDIS_STREAMS
#include <idem/redis_stream_source.hpp>
#endif
#ifdef HAVE_IDEM_RABBITMQ
#include <idem/rabbitmq_source.hpp>
#endif
#ifdef HAVE_IDEM_NATS
#include <idem/nats_source.hpp>
#endif
#ifdef HAVE_IDEM_KAFKA
#include <idem/kafka_source.hpp>
#endif
#ifdef HAVE_IDEM_PULSAR
#include <idem/pulsar_source.hpp>
#endif
#ifdef HAVE_IDEM_JSON
#include <idem/json_format.hpp>
#endif
#ifdef HAVE_IDEM_STATEMACHINE
#include <idem/statemachine.hpp>
#endif

namespace {

struct Msg {
  std::string id;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  return 1;
}

#ifdef HAVE_IDEM_STORES
int check_store(const std::string& uri) {
  auto store = idem::open_store(uri);
  if (!store.ok()) return fail("open_store(" + uri + "): " + store.status().to_string());
  idem::ConsumerOptions opts;
  opts.store = *store;
  idem::Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  int runs = 0;
  auto consumer = idem::Consumer<Msg>::create(opts, ex, [&](const Msg&, idem::HandlerContext&) {
    ++runs;
    return idem::HandlerResult::ok();
  });
  if (!consumer.ok()) return fail("create: " + consumer.status().to_string());
  const auto first = consumer->process(Msg{"a-1"});
  const auto second = consumer->process(Msg{"a-1"});
  if (first.reason != idem::Reason::kProcessed || second.reason != idem::Reason::kDuplicate || runs != 1)
    return fail(uri + ": unexpected decisions " + std::string(idem::reason_name(first.reason)) + ", " +
                std::string(idem::reason_name(second.reason)));
  std::printf("%s: ok\n", uri.c_str());
  return 0;
}

#endif

int check_stores() {
  int rc = 0;
#ifdef HAVE_IDEM_STORES
  rc |= check_store("memory:");
#ifdef HAVE_IDEM_SQLITE
  const auto db = std::filesystem::temp_directory_path() / ("idem-package-" + std::to_string(::getpid()) + ".db");
  rc |= check_store("sqlite:" + db.string());
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
  if (idem::sqlite::connection(idem::HandlerContext{}) != nullptr || sqlite3_libversion_number() <= 0)
    rc |= fail("sqlite: connection() outside a handler should be null");
#endif
#ifdef HAVE_IDEM_ROCKSDB
  const auto rdb = std::filesystem::temp_directory_path() / ("idem-package-rocksdb-" + std::to_string(::getpid()));
  rc |= check_store("rocksdb:" + rdb.string());
#ifdef HAVE_IDEM_BLOOM
  rc |= check_store("bloom+rocksdb:" + rdb.string() + "-front?capacity=10000");
  std::filesystem::remove_all(rdb.string() + "-front");
#endif
  std::filesystem::remove_all(rdb);
#endif
#endif
#ifdef HAVE_IDEM_POSTGRES
  if (idem::postgres::connection(idem::HandlerContext{}) != nullptr || PQlibVersion() <= 0)
    rc |= fail("postgres: connection() outside a handler should be null");
#endif
  return rc;
}

// Each adapter's URI parser, and open_source's answer to a scheme no adapter has.
int check_brokers() {
  int rc = 0;
#ifdef HAVE_IDEM_REDIS_STREAMS
  rc |= idem::redis_streams::parse_uri("redis-stream://127.0.0.1:6379/s?group=g").ok() ? 0 : fail("redis_streams");
#endif
#ifdef HAVE_IDEM_RABBITMQ
  rc |= idem::rabbitmq::parse_uri("amqp://u:p@127.0.0.1:5672/%2F?queue=q").ok() ? 0 : fail("rabbitmq");
#endif
#ifdef HAVE_IDEM_NATS
  rc |= idem::nats::parse_uri("nats://127.0.0.1:4222?stream=s&durable=d").ok() ? 0 : fail("nats");
#endif
#ifdef HAVE_IDEM_KAFKA
  rc |= idem::kafka::parse_uri("kafka://127.0.0.1:9092/t?group=g").ok() ? 0 : fail("kafka");
#endif
#ifdef HAVE_IDEM_PULSAR
  rc |= idem::pulsar::parse_uri("pulsar-ws://127.0.0.1:8080/public/default/t?subscription=s").ok() ? 0 : fail("pulsar");
#endif
#ifdef HAVE_IDEM_BROKERS
  auto s = idem::open_source("gopher://127.0.0.1/x");
  if (s.ok() || s.status().message().find("unknown broker URI scheme") == std::string::npos)
    rc |= fail("open_source(gopher://) should name the unknown scheme: " + s.status().to_string());
#endif
  return rc;
}

int check_others() {
  int rc = 0;
#ifdef HAVE_IDEM_JSON
  auto f = idem::json::Format::create({.id = "/id"});
  idem::Delivery d;
  d.body = R"({"id":"j-1"})";
  rc |= f.ok() && f->read(d).ok() && f->read(d)->id == "j-1" ? 0 : fail("json");
#endif
#ifdef HAVE_IDEM_STATEMACHINE
  auto m = idem::load_machine_yaml("name: m\ninitial: a\ntransitions:\n  - {from: a, on: go, to: b}\n", "m.yaml");
  rc |= m.ok() ? 0 : fail("statemachine: " + m.format(idem::Severity::kError));
#endif
  return rc;
}

}  // namespace

int main() {
  const int rc = check_stores() | check_brokers() | check_others();
  if (rc == 0) std::printf("every component: ok\n");
  return rc;
}
