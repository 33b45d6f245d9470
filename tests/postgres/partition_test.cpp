// A transactional consumer cut from PostgreSQL, on a host of the test's own
// (support/netns.hpp): the consumer runs on a thread inside a network namespace and
// reaches its own server (listening on the link too) only over a veth pair, which the
// test cuts (every packet dropped, both ways) while the handler's transaction is open,
// and heals. Label "partitions"; each test prints one line of figures
// (docs/reliability.md). Without root the tests skip and say why.
//   - cut briefly: the commit waits for the link and lands once it returns; the
//     effect exists once and the redelivery is a duplicate;
//   - cut for longer than the connection's timeouts: the consumer gives up
//     (store_unavailable) instead of hanging, the server rolls the abandoned
//     transaction back and frees its claim, and the redelivery applies the effect
//     once.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "idem/consumer.hpp"
#include "idem/postgres_store.hpp"
#include "support/netns.hpp"
#include "support/postgres_server.hpp"

namespace idem::postgres_test {
namespace {

using namespace std::chrono_literals;
using test_support::Host;

struct Msg {
  std::string id;
};

// The claim's lease: a consumer that gave up on its commit keeps it until it expires.
constexpr Duration kLease{5000};

// Runs sql on a plain connection to 127.0.0.1:port; the first value, or "ERROR: …".
std::string query(std::uint16_t port, const std::string& sql) {
  PGconn* c = PQconnectdb(("host=127.0.0.1 user=idem dbname=postgres port=" + std::to_string(port)).c_str());
  PGresult* r = PQexec(c, sql.c_str());
  std::string out;
  const auto st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    out = std::string("ERROR: ") + PQresultErrorMessage(r);
  } else if (PQntuples(r) > 0) {
    out = PQgetvalue(r, 0, 0);
  }
  PQclear(r);
  PQfinish(c);
  return out;
}

// The consumer on the host: processes m1 with a handler that inserts a row in its
// transaction and, the first time, waits for `release` first; then m1 again once
// `again` is set. Lives on a detached thread, so that a consumer that hangs fails the
// test instead of blocking it.
struct OnHost {
  std::promise<void> entered, release, again;
  std::promise<Decision> first, second;
  Duration first_took{0};
};

void start_on_host(Host& host, std::shared_ptr<OnHost> s, std::uint16_t port, std::string schema) {
  std::thread([&host, s, port, schema] {
    (void)host.enter();
    postgres::Options po;
    po.connection = {{"host", host.here()}, {"port", std::to_string(port)}, {"user", "idem"}, {"dbname", "postgres"}};
    po.schema = schema;
    auto store = postgres::open(po);
    if (!store.ok()) {
      ADD_FAILURE() << "the consumer on the host cannot open its store: " << store.status().to_string();
      return;
    }
    ConsumerOptions o;
    o.store = *store;
    o.transactional = true;
    o.lease = kLease;
    o.store_retry_delay = 5ms;
    Extractors<Msg> ex;
    ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
    bool first_run = true;
    auto c = Consumer<Msg>::create(o, ex, [&](const Msg& m, HandlerContext& ctx) {
      const std::string sql = "INSERT INTO " + schema + ".effects VALUES('" + m.id + "')";
      PGresult* r = PQexec(postgres::connection(ctx), sql.c_str());
      const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (std::exchange(first_run, false)) {
        s->entered.set_value();
        s->release.get_future().wait();
      }
      return ok ? HandlerResult::ok() : HandlerResult::fail("insert");
    });
    if (!c.ok()) return;
    const auto start = std::chrono::steady_clock::now();
    const Decision d = c->process({"m1"});
    s->first_took = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    s->first.set_value(d);
    s->again.get_future().wait();
    // The broker redelivers after each retry's delay; the claim's lease may still run.
    Decision again = c->process({"m1"});
    for (int i = 0; i < 100 && again.reason == Reason::kInProgress; ++i) {
      std::this_thread::sleep_for(100ms);
      again = c->process({"m1"});
    }
    s->second.set_value(again);
  }).detach();
}

class PostgresPartition : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = Host::create();
    if (!h.ok()) IDEM_NO_NETNS() << h.status().message();
    host_ = std::move(*h);
    auto server = PostgresServer::start({.also_listen = host_->here()});
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(*server);
    ASSERT_EQ(query(server_->port(), "CREATE SCHEMA p; CREATE TABLE p.effects(id text NOT NULL)"), "");
  }
  void TearDown() override {
    if (host_) (void)host_->heal();  // an error when not cut
  }

  // Cuts the link while m1's transaction is open, releases the handler, and heals
  // after `cut_for`. Returns the two decisions of the consumer on the host.
  std::pair<Decision, Decision> cut_mid_transaction(std::chrono::milliseconds cut_for, Duration* first_took) {
    auto s = std::make_shared<OnHost>();
    auto first = s->first.get_future();
    auto second = s->second.get_future();
    start_on_host(*host_, s, server_->port(), "p");
    EXPECT_EQ(s->entered.get_future().wait_for(20s), std::future_status::ready) << "the handler on the host never ran";
    EXPECT_TRUE(host_->cut().ok());
    s->release.set_value();
    std::this_thread::sleep_for(cut_for);
    EXPECT_TRUE(host_->heal().ok());
    EXPECT_EQ(first.wait_for(60s), std::future_status::ready) << "the consumer on the host hangs in its commit";
    const Decision a = first.get();
    *first_took = s->first_took;
    s->again.set_value();
    EXPECT_EQ(second.wait_for(60s), std::future_status::ready) << "the redelivery hangs (a claim still held?)";
    return {a, second.get()};
  }

  std::unique_ptr<Host> host_;
  std::unique_ptr<PostgresServer> server_;
};

TEST_F(PostgresPartition, ACutShorterThanTheTimeoutsDelaysTheCommitThatThenLandsOnce) {
  Duration took{0};
  const auto [first, again] = cut_mid_transaction(3s, &took);
  EXPECT_EQ(first.reason, Reason::kProcessed) << first.detail;
  EXPECT_EQ(again.reason, Reason::kDuplicate) << again.detail;
  const std::string rows = query(server_->port(), "SELECT count(*) FROM p.effects");
  EXPECT_EQ(rows, "1");
  if (HasFailure()) return;  // the line below states what the checks found
  std::printf("partition postgres, cut 3 s mid-commit: 1 message, commit %s after %lld ms, redelivery %s, "
              "effect rows %s, lost 0\n",
              std::string(reason_name(first.reason)).c_str(), static_cast<long long>(took.count()),
              std::string(reason_name(again.reason)).c_str(), rows.c_str());
}

TEST_F(PostgresPartition, ACutLongerThanTheTimeoutsGivesUpRollsBackAndAppliesOnceAfter) {
  Duration took{0};
  const auto [first, again] = cut_mid_transaction(25s, &took);
  EXPECT_EQ(first.action, Action::kRetry) << first.detail;
  EXPECT_EQ(first.reason, Reason::kStoreUnavailable) << first.detail;
  EXPECT_EQ(again.reason, Reason::kProcessed) << again.detail;
  const std::string rows = query(server_->port(), "SELECT count(*) FROM p.effects");
  EXPECT_EQ(rows, "1");
  // The server noticed the vanished client and ended its session: no transaction of
  // the cut connection stays open.
  EXPECT_EQ(query(server_->port(), "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"),
            "0");
  if (HasFailure()) return;  // the line below states what the checks found
  std::printf("partition postgres, cut 25 s mid-commit: 1 message, commit %s after %lld ms, redelivery %s, "
              "effect rows %s, lost 0\n",
              std::string(reason_name(first.reason)).c_str(), static_cast<long long>(took.count()),
              std::string(reason_name(again.reason)).c_str(), rows.c_str());
}

}  // namespace
}  // namespace idem::postgres_test
