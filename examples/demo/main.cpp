// idem_demo: a small shop whose consumer turns a broker's at-least-once delivery into
// effectively-once processing with idem and its SQLite store.
//
//   idem_demo [DIR]   DIR keeps demo.db for inspection (an old one there is replaced);
//                     default: a temporary directory, removed at the end
//
// Chapter 1 charges orders through a payment gateway (an external effect): duplicates,
// a consumer crash before its acks, a flaky gateway and a poison message.
// Chapter 2 writes the shop's own ledger in the same SQLite transaction as idem's
// dedup commit (transactional mode).
// Chapter 3 (catalogue.cpp) runs a partner's product-status events, out of order,
// through strict ordering and the product state machine.
// Each chapter ends with an audit of the effects against what should have happened;
// the exit status is 0 iff every check passed.
#include <sqlite3.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "books.hpp"
#include "broker.hpp"
#ifdef IDEM_DEMO_WITH_CATALOGUE
#include "catalogue.hpp"
#endif
#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#include "idem/sqlite_store.hpp"
#include "order.hpp"
#include "payment_gateway.hpp"
#include "report.hpp"

namespace demo {
namespace {

using idem::Consumer;
using idem::Decision;
using idem::HandlerContext;
using idem::HandlerResult;

// What every chapter shares: the simulated time, the metrics, the database file.
struct World {
  std::string db_path;
  std::shared_ptr<idem::ManualClock> clock = std::make_shared<idem::ManualClock>();
  std::shared_ptr<idem::Metrics> metrics;  // per chapter; survives consumer restarts
};

// The consumer's options on a freshly opened demo.db. Returns nullopt (after printing
// why) if the store cannot be opened.
std::optional<idem::ConsumerOptions> consumer_options(const World& w) {
  auto store = idem::open_store("sqlite:" + w.db_path);
  if (!store.ok()) {
    std::fprintf(stderr, "idem_demo: cannot open the store: %s\n", store.status().to_string().c_str());
    return std::nullopt;
  }
  idem::ConsumerOptions o;
  o.guarantee = idem::Guarantee::kEffectivelyOnce;
  o.store = std::move(store).value();
  o.max_retries = 5;                         // then dead_letter
  o.backoff.initial = idem::Duration(1000);  // 1 s, 2 s, 4 s, …
  o.clock = w.clock;
  o.metrics = w.metrics;
  return o;
}

// Delivers everything the broker has, settling each delivery by the consumer's decision.
void drain(Broker& broker, Consumer<Order>& consumer, const DeliveryTable& table, const World& w) {
  while (auto d = broker.next()) {
    const Decision decision = consumer.process(d->order);
    table.row(w.clock->now(), *d, decision);
    broker.settle(*d, decision);
  }
}

// Chapter 1: charging orders through a payment gateway. Returns true iff the audit passed.
bool payments(World& w) {
  print_chapter("Chapter 1: the shop charges orders through a payment gateway",
                "The broker delivers at least once. The gateway is the side effect that must\n"
                "happen exactly once per order; it keeps its own account, audited at the end.");
  w.metrics = std::make_shared<idem::Metrics>();
  PaymentGateway gateway;
  gateway.fail_next("order-5", 2);  // the gateway times out twice for order-5
  auto handler = [&gateway](const Order& o, HandlerContext&) {
    if (idem::Status s = gateway.charge(o); !s.ok()) return HandlerResult::fail(s.message());
    return HandlerResult::ok();
  };
  auto start = [&]() -> std::optional<Consumer<Order>> {
    auto opts = consumer_options(w);
    if (!opts) return std::nullopt;
    auto c = Consumer<Order>::create(std::move(*opts), order_extractors(), handler);
    if (!c.ok()) {
      std::fprintf(stderr, "idem_demo: %s\n", c.status().to_string().c_str());
      return std::nullopt;
    }
    return std::move(c).value();
  };
  auto consumer = start();
  if (!consumer) return false;

  Broker broker(w.clock);
  const DeliveryTable table(w.clock->now());
  table.header();

  const Order order1 = make_order("order-1", "ada", 2500);
  broker.publish(order1, "new order");
  broker.publish(make_order("order-2", "grace", 1050), "new order");
  broker.publish(order1, "the producer retried its publish");
  drain(broker, *consumer, table, w);

  // The consumer processes two orders, then dies before its acks reach the broker.
  broker.publish(make_order("order-3", "linus", 725), "new order");
  broker.publish(make_order("order-4", "barbara", 9999), "new order");
  std::vector<Delivery> unacked;
  for (int i = 0; i < 2; ++i) {
    auto d = broker.next();
    if (!d) return false;
    table.row(w.clock->now(), *d, consumer->process(d->order));
    unacked.push_back(*d);  // the ack is never sent
  }
  table.event("the consumer crashes before its acks for order-3 and order-4 reach the broker");
  consumer.reset();  // closes the store: only what is in demo.db survives
  consumer = start();
  if (!consumer) return false;
  table.event("it restarts on the same demo.db; the broker redelivers what was not acked");
  for (const Delivery& d : unacked) broker.redeliver_unacked(d);
  drain(broker, *consumer, table, w);

  broker.publish(make_order("order-5", "edsger", 4200), "new order (the gateway will time out twice)");
  drain(broker, *consumer, table, w);

  const Order poison = make_order("order-6", "mallory", -100);
  broker.publish(poison, "new order with a negative amount (poison)");
  drain(broker, *consumer, table, w);
  broker.publish(poison, "an operator replays the dead-letter queue");
  drain(broker, *consumer, table, w);

  broker.publish(make_order("order-2", "trudy", 777), "a buggy producer reuses the id order-2");
  drain(broker, *consumer, table, w);

  std::printf("\n");
  print_metrics(w.metrics->snapshot());
  std::printf(
      "\n  note: a crash after the gateway's charge but before idem's commit would charge again on\n"
      "  redelivery (once the lease expires). Chapter 2 closes that window for effects that live\n"
      "  in the same database as the dedup records.\n");

  Audit audit;
  std::int64_t expected_cents = 0;
  for (const auto& [id, cents] :
       {std::pair{"order-1", 2500}, {"order-2", 1050}, {"order-3", 725}, {"order-4", 9999}, {"order-5", 4200}}) {
    audit.check(gateway.charges_of(id) == 1,
                std::string(id) + " charged exactly once (" + std::to_string(gateway.charges_of(id)) + ")");
    expected_cents += cents;
  }
  audit.check(gateway.charges_of("order-6") == 0, "poison order-6 never charged");
  audit.check(gateway.orders_charged() == 5, "no other order charged");
  audit.check(gateway.balance_cents() == expected_cents, "gateway balance " + money(gateway.balance_cents()) +
                                                             " = sum of the five orders " + money(expected_cents));
  const auto& dl = broker.dead_letters();
  audit.check(dl.size() == 2 && dl[0].id == "order-6" && dl[1].customer == "trudy",
              "dead letters: order-6 (retries exhausted) and the reused id order-2 (payload conflict), once each");
  return audit.print("audit of the gateway's own account:");
}

// Chapter 2: the ledger row and the dedup record in one SQLite transaction.
bool ledger(World& w) {
  print_chapter("Chapter 2: the shop's own ledger, in the same transaction as idem's commit",
                "Transactional mode: the handler writes its ledger row through\n"
                "idem::sqlite::connection(ctx); the row and the dedup record commit together or not at all.");
  if (idem::Status s = books::create(w.db_path); !s.ok()) {
    std::fprintf(stderr, "idem_demo: %s\n", s.to_string().c_str());
    return false;
  }
  w.metrics = std::make_shared<idem::Metrics>();
  auto opts = consumer_options(w);
  if (!opts) return false;
  opts->transactional = true;

  int warehouse_failures = 1;             // the first run for order-9 fails after writing
  std::optional<int> rows_seen_on_retry;  // ledger rows for order-9 when it is retried
  auto handler = [&](const Order& o, HandlerContext& ctx) {
    sqlite3* db = idem::sqlite::connection(ctx);
    if (db == nullptr) return HandlerResult::fail("no SQLite transaction (transactional mode is off)");
    if (o.id == "order-9" && ctx.attempt() > 1) {
      auto rows = books::rows_for(db, o.id);
      if (!rows.ok()) return HandlerResult::fail(rows.status().message());
      rows_seen_on_retry = *rows;
    }
    if (idem::Status s = books::record(db, o); !s.ok()) return HandlerResult::fail(s.message());
    if (o.id == "order-9" && warehouse_failures-- > 0)
      return HandlerResult::fail("the warehouse call failed after the ledger row was written");
    return HandlerResult::ok();
  };
  auto created = Consumer<Order>::create(std::move(*opts), order_extractors(), handler);
  if (!created.ok()) {
    std::fprintf(stderr, "idem_demo: %s\n", created.status().to_string().c_str());
    return false;
  }
  std::optional<Consumer<Order>> consumer(std::move(created).value());

  Broker broker(w.clock);
  const DeliveryTable table(w.clock->now());
  table.header();
  const Order order7 = make_order("order-7", "alan", 1200);
  const Order order8 = make_order("order-8", "margaret", 3000);
  broker.publish(order7, "new order");
  broker.publish(order8, "new order");
  broker.publish(order7, "redelivered after a rebalance");
  broker.publish(make_order("order-9", "donald", 450), "new order (its warehouse call fails once)");
  broker.publish(order8, "redelivered after a broker failover");
  drain(broker, *consumer, table, w);

  std::printf("\n");
  print_metrics(w.metrics->snapshot());
  consumer.reset();  // closes the store, which locks the file, so the audit can read it

  Audit audit;
  auto books = books::read(w.db_path);
  if (!books.ok()) {
    audit.check(false, "read the ledger: " + books.status().to_string());
    return audit.print("audit of the ledger table in demo.db:");
  }
  for (const char* id : {"order-7", "order-8", "order-9"})
    audit.check(books->rows[id] == 1,
                std::string(id) + " has exactly one ledger row (" + std::to_string(books->rows[id]) + ")");
  audit.check(books->rows.size() == 3, "no other rows");
  audit.check(books->balance_cents == 1200 + 3000 + 450,
              "ledger balance " + money(books->balance_cents) + " = " + money(1200 + 3000 + 450));
  audit.check(rows_seen_on_retry == 0,
              "the row written by order-9's failed attempt was rolled back with it (rows seen on retry: " +
                  (rows_seen_on_retry ? std::to_string(*rows_seen_on_retry) : std::string("never retried")) + ")");
  return audit.print("audit of the ledger table in demo.db:");
}

}  // namespace
}  // namespace demo

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string dir;
  bool temporary = false;
  if (argc > 1) {
    dir = argv[1];
    std::error_code ec;
    fs::create_directories(dir, ec);
  } else {
    std::string pattern = (fs::temp_directory_path() / "idem-demo-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("idem_demo: mkdtemp");
      return 1;
    }
    dir = pattern;
    temporary = true;
  }
  demo::World world;
  world.db_path = (fs::path(dir) / "demo.db").string();
  // The story starts from an empty store: a demo.db left by an earlier run would
  // answer every order as a duplicate.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ec;
    fs::remove(world.db_path + suffix, ec);
  }
  std::printf("idem demo: store sqlite:%s\n", world.db_path.c_str());

  const bool payments_ok = demo::payments(world);
  bool ledger_ok = payments_ok && demo::ledger(world);
#ifdef IDEM_DEMO_WITH_CATALOGUE
  ledger_ok = ledger_ok && demo::catalogue(world.db_path, world.clock);
#endif

  std::printf("\n%s\n", payments_ok && ledger_ok ? "Every effect happened exactly once."
                                                 : "FAILED: some effect did not happen exactly once (see above).");
  if (temporary) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  } else {
    std::printf("demo.db kept in %s\n", dir.c_str());
  }
  return payments_ok && ledger_ok ? 0 : 1;
}
