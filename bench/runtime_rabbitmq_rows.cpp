// The RabbitMQ rows of idem_bench_runtime (see bench_runtime.cpp).
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/rabbitmq_source.hpp"
#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"
#include "support/rabbitmq_server.hpp"

namespace idem::bench {
namespace {

// basic.consume with manual acks and basic.qos `prefetch`; one basic.ack (multiple) per
// `batch` messages until n, followed by a tx.commit when `tx` (the channel in tx.select,
// as the source's). With a writer, each batch is written in one SQLite transaction
// before its ack (the hand-written batch consumer); else no dedup.
double plain_loop(int port, const std::string& queue, std::size_t n, std::size_t batch, std::uint16_t prefetch,
                  bool tx, BatchWriter* writer = nullptr) {
  amqp_connection_state_t c = amqp_new_connection();
  amqp_socket_t* s = amqp_tcp_socket_new(c);
  if (amqp_socket_open(s, "127.0.0.1", port) != AMQP_STATUS_OK) return 0;
  amqp_login(c, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
  amqp_channel_open(c, 1);
  amqp_basic_qos(c, 1, 0, prefetch, 0);
  if (tx) amqp_tx_select(c, 1);
  amqp_basic_consume(c, 1, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  std::size_t got = 0;
  const auto t0 = Clock::now();
  while (got < n) {
    amqp_maybe_release_buffers(c);
    amqp_envelope_t env;
    timeval tv{5, 0};
    if (amqp_consume_message(c, &env, &tv, 0).reply_type != AMQP_RESPONSE_NORMAL) break;
    if (writer != nullptr) {
      if (got % batch == 0) writer->begin();
      writer->add(std::string_view(static_cast<const char*>(env.message.body.bytes), env.message.body.len));
    }
    ++got;
    if (got % batch == 0 || got == n) {
      if (writer != nullptr) writer->commit();
      amqp_basic_ack(c, 1, env.delivery_tag, 1);
      if (tx && amqp_tx_commit(c, 1) == nullptr) break;
    }
    amqp_destroy_envelope(&env);
  }
  const double r = rate(got, Clock::now() - t0);
  amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(c, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(c);
  return r;
}

double idem_loop(const rabbitmq::Options& ro, std::size_t n, std::size_t batch, const std::string& db) {
  auto src = rabbitmq::open(ro).value();
  return idem_rate(*src, n, batch, db);
}

}  // namespace

bool rabbitmq_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows) {
  auto server = rabbitmq_test::RabbitServer::start();
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start rabbitmq-server: %s\n", server.status().to_string().c_str());
    return false;
  }
  constexpr std::uint16_t kPrefetch = 1000;
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  rabbitmq::Options ro = rabbitmq::parse_uri((*server)->uri("x")).value();
  ro.prefetch = kPrefetch;
  for (const char* queue : {"plain", "plain_tx", "batched", "idem"}) {
    ro.queue = queue;
    auto p = rabbitmq::open_publisher(ro);
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", queue);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-amqp-" + std::to_string((*server)->port()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back({"plain_amqp", "basic.consume, prefetch 1000, one basic.ack (multiple) per b, no dedup",
                  plain_loop((*server)->port(), "plain", n, batch, kPrefetch, false)});
  rows.push_back({"plain_amqp_tx", "the same in tx.select: a tx.commit after each basic.ack, as the source commits",
                  plain_loop((*server)->port(), "plain_tx", n, batch, kPrefetch, true)});
  {
    BatchWriter writer((dir / "batched.db").string());
    rows.push_back({"batched_amqp", "the plain loop writing each batch in one SQLite transaction before its ack",
                    plain_loop((*server)->port(), "batched", n, batch, kPrefetch, false, &writer)});
  }
  ro.queue = "idem";
  rows.push_back({"idem_amqp", "runtime, RabbitMQ source (prefetch 1000), SQLite transactional, 2 workers, batch b",
                  idem_loop(ro, n, batch, (dir / "idem.db").string())});
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace idem::bench
