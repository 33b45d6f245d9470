// The C++ examples of README.md, of the headers and of docs/*.md, compiled as written
// and run against memory: or sqlite:. Each example is one function below, and the
// comment above it names the snippet it mirrors; keep the two in step. Only the
// user's own functions (charge, ship, die, the broker) are stubbed. Where a snippet
// opens a fixed path, the path is the function's parameter.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "idem/backend/store_wrapper.hpp"
#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#ifdef IDEM_DOC_EXAMPLES_WITH_SQLITE
#include "idem/sqlite_store.hpp"
#endif
#ifdef IDEM_DOC_EXAMPLES_WITH_MACHINE
#include "idem/statemachine.hpp"
#endif
#ifdef IDEM_DOC_EXAMPLES_WITH_BROKERS
#include "idem/json_format.hpp"
#include "idem/open_source.hpp"
#endif
#include "support/temp_dir.hpp"

namespace {

// The snippets' die(): here it fails the test that reached it.
struct Died : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void die(const std::string& why) { throw Died(why); }

// --- README.md, "A short tour of the API" -----------------------------------------

namespace tour {

struct Order {
  std::string id;
  std::string account;
  std::uint64_t seq;
  std::string body;
};

bool gateway_is_up = true;
int charges = 0;
bool gateway_up() { return gateway_is_up; }
void charge(const Order&) { ++charges; }

struct Msg {};  // the broker client's own message handle
struct Broker {
  std::vector<std::string> calls;
  void ack(const Msg&) { calls.push_back("ack"); }
  void nack(const Msg&, idem::Duration delay) { calls.push_back("nack " + std::to_string(delay.count())); }
  void publish_dlq(const Msg&, std::string_view reason) { calls.push_back("dlq " + std::string(reason)); }
};

// Mirrors README.md's tour, which opens "sqlite:/var/lib/orders/idem.db".
void run(const std::string& uri, const Order& order, Broker& broker, const Msg& msg) {
  idem::ConsumerOptions opts;  // every field documented in options.hpp
  opts.guarantee = idem::Guarantee::kEffectivelyOnce;
  opts.store = idem::open_store(uri).value();
  opts.max_retries = 5;  // then dead_letter / retries_exhausted

  idem::Extractors<Order> ex;
  ex.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  ex.payload = [](const Order& o) { return std::optional<std::string_view>(o.body); };

  auto consumer = idem::Consumer<Order>::create(opts, ex, [](const Order& o, idem::HandlerContext&) {
    if (!gateway_up()) return idem::HandlerResult::fail("gateway down");  // retried, capped
    charge(o);
    return idem::HandlerResult::ok("receipt-42");  // stored; duplicates get it back
  });
  if (!consumer.ok()) die(consumer.status().to_string());  // names the option to fix

  idem::Decision d = consumer->process(order);
  switch (d.action) {
    case idem::Action::kAck:
      broker.ack(msg);
      break;
    case idem::Action::kRetry:
      broker.nack(msg, d.delay);
      break;
    case idem::Action::kDeadLetter:
      broker.publish_dlq(msg, idem::reason_name(d.reason));
      broker.ack(msg);
      break;
    case idem::Action::kHold:
      break;
  }
}

}  // namespace tour

TEST(DocExamples, ReadmeTourProcessesOnMemory) {
  tour::Broker broker;
  tour::charges = 0;
  tour::gateway_is_up = true;
  tour::run("memory:", {"order-1", "{\"amount\":42}"}, broker, tour::Msg{});
  EXPECT_EQ(tour::charges, 1);
  EXPECT_EQ(broker.calls, std::vector<std::string>{"ack"});
}

#ifdef IDEM_DOC_EXAMPLES_WITH_SQLITE
TEST(DocExamples, ReadmeTourOnSqliteRetriesThenProcessesOnceAcrossRestarts) {
  idem::testing::TempDir dir("doc-tour");
  const std::string uri = "sqlite:" + dir.sub("idem.db");
  const tour::Order order{"order-1", "acc-1", 1, "{\"amount\":42}"};
  tour::Broker broker;
  tour::charges = 0;
  tour::gateway_is_up = false;
  tour::run(uri, order, broker, tour::Msg{});  // the gateway is down: retried after the backoff
  tour::gateway_is_up = true;
  tour::run(uri, order, broker, tour::Msg{});  // processed
  tour::run(uri, order, broker, tour::Msg{});  // a new consumer on the same file: a duplicate
  EXPECT_EQ(tour::charges, 1);
  EXPECT_EQ(broker.calls, (std::vector<std::string>{"nack 1000", "ack", "ack"}));
  tour::run(uri, {"order-1", "{\"amount\":43}"}, broker, tour::Msg{});  // same id, other payload
  EXPECT_EQ(broker.calls.back(), "ack");
  EXPECT_EQ(broker.calls.at(broker.calls.size() - 2), "dlq payload_conflict");
}
#endif

// --- README.md, "Ordering" ---------------------------------------------------------

namespace ordering {

struct Order {
  std::string id;
  std::string account;
  std::uint64_t seq = 0;
};

std::string encode_order(const Order& o) { return o.id + '\n' + o.account + '\n' + std::to_string(o.seq); }
std::optional<Order> decode_order(std::string_view bytes) {
  const auto a = bytes.find('\n');
  const auto b = a == std::string_view::npos ? a : bytes.find('\n', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  Order o;
  o.id = std::string(bytes.substr(0, a));
  o.account = std::string(bytes.substr(a + 1, b - a - 1));
  o.seq = std::stoull(std::string(bytes.substr(b + 1)));
  return o;
}

std::vector<std::string> dead_lettered;
void publish_dlq(const std::string& message) { dead_lettered.push_back(message); }

// Mirrors README.md's "Ordering" snippet.
void configure(idem::ConsumerOptions& opts, idem::Extractors<Order>& ex) {
  opts.ordering.mode = idem::Ordering::kStrict;            // or kMonotonic, kWatermark
  opts.on_buffered = [](const idem::BufferedOutcome& b) {  // the fate of a buffered message
    if (b.decision.action == idem::Action::kDeadLetter) publish_dlq(b.message);
  };
  ex.key = [](const Order& o) { return std::optional<std::string_view>(o.account); };
  ex.version = [](const Order& o) { return std::optional<std::uint64_t>(o.seq); };
  ex.encode = encode_order;
  ex.decode = decode_order;  // buffered messages are stored encoded
}

// Runs seq 2, then seq 1 of one order; returns the decisions and what the handler saw.
std::vector<idem::Decision> run(const std::string& uri, std::vector<std::uint64_t>& seen) {
  idem::ConsumerOptions opts;
  opts.store = idem::open_store(uri).value();
  idem::Extractors<Order> ex;
  ex.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  configure(opts, ex);
  auto consumer = idem::Consumer<Order>::create(opts, ex, [&seen](const Order& o, idem::HandlerContext&) {
    seen.push_back(o.seq);
    return idem::HandlerResult::ok();
  });
  if (!consumer.ok()) die(consumer.status().to_string());
  std::vector<idem::Decision> ds;
  ds.push_back(consumer->process({"o7-2", "o7", 2}));
  ds.push_back(consumer->process({"o7-1", "o7", 1}));
  return ds;
}

}  // namespace ordering

TEST(DocExamples, ReadmeOrderingHoldsAnEarlyVersionOnMemory) {
  std::vector<std::uint64_t> seen;
  const auto ds = ordering::run("memory:", seen);
  EXPECT_EQ(ds[0].action, idem::Action::kHold);  // memory: is not durable
  EXPECT_EQ(ds[0].reason, idem::Reason::kBuffered);
  EXPECT_EQ(ds[1].reason, idem::Reason::kProcessed);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_TRUE(ordering::dead_lettered.empty());
}

#ifdef IDEM_DOC_EXAMPLES_WITH_SQLITE
TEST(DocExamples, ReadmeOrderingBuffersAnEarlyVersionDurablyOnSqlite) {
  idem::testing::TempDir dir("doc-ordering");
  std::vector<std::uint64_t> seen;
  const auto ds = ordering::run("sqlite:" + dir.sub("idem.db"), seen);
  EXPECT_EQ(ds[0].action, idem::Action::kAck);  // stored durably: the broker may forget it
  EXPECT_EQ(ds[0].reason, idem::Reason::kBuffered);
  EXPECT_EQ(ds[1].reason, idem::Reason::kProcessed);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1, 2}));
}
#endif

#ifdef IDEM_DOC_EXAMPLES_WITH_SQLITE
// --- docs/outbox.md, the example at the top -------------------------------------------

namespace outbox {

struct Order {
  std::string id;
};

std::vector<idem::OutgoingMessage> sent;  // what the stub broker received
struct StubPublisher : idem::Publisher {
  idem::Status publish(std::span<const idem::OutgoingMessage> ms) override {
    sent.insert(sent.end(), ms.begin(), ms.end());
    return idem::ok_status();
  }
};
idem::StatusOr<std::unique_ptr<idem::Publisher>> my_open_publisher(const std::string&) {
  return std::unique_ptr<idem::Publisher>(std::make_unique<StubPublisher>());
}
void write_order_row(sqlite3* db, const Order&) {
  if (db == nullptr) die("no transaction");
}
std::string shipment_of(const Order& o) { return "ship " + o.id; }

// Mirrors docs/outbox.md's example, which opens "sqlite:/var/lib/app/idem.db".
idem::Decision run(const std::string& store_uri, const std::vector<Order>& input, std::size_t i) {
  idem::Extractors<Order> extractors;
  extractors.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  idem::ConsumerOptions o;
  o.store = idem::open_store(store_uri).value();
  o.transactional = true;
  o.outbox.publishers = [](const std::string& uri) { return my_open_publisher(uri); };
  auto consumer = idem::Consumer<Order>::create(o, extractors, [](const Order& order, idem::HandlerContext& ctx) {
    write_order_row(idem::sqlite::connection(ctx), order);  // the handler's own write
    if (auto s = ctx.publish("redis-stream://mq:6379/shipments", shipment_of(order)); !s.ok())
      return idem::HandlerResult::fail(s.to_string());
    return idem::HandlerResult::ok();
  });
  return consumer->process(input[i]);
}

}  // namespace outbox

TEST(DocExamples, OutboxExampleSendsOneMessageAfterTheCommitOnSqlite) {
  idem::testing::TempDir dir("doc-outbox");
  outbox::sent.clear();
  const auto d = outbox::run("sqlite:" + dir.sub("idem.db"), {{"order-7"}}, 0);
  EXPECT_EQ(d.reason, idem::Reason::kProcessed);
  ASSERT_EQ(outbox::sent.size(), 1u);
  EXPECT_EQ(outbox::sent[0].id, "order-7#0");
  EXPECT_EQ(outbox::sent[0].body, "ship order-7");
}
#endif

// --- include/idem/consumer.hpp, the example at the top ------------------------------

namespace header {

struct Order {
  std::string id;
};

int shipped = 0;
void ship(const Order&) { ++shipped; }

// Mirrors consumer.hpp's example, which opens "sqlite:/var/lib/app/idem.db".
idem::Decision run(const std::string& uri, const Order& order) {
  idem::ConsumerOptions opts;
  opts.store = idem::open_store(uri).value();
  idem::Extractors<Order> ex;
  ex.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  auto consumer = idem::Consumer<Order>::create(opts, ex, [](const Order& o, idem::HandlerContext&) {
    ship(o);
    return idem::HandlerResult::ok();
  });
  idem::Decision d = consumer->process(order);  // then ack / nack / dead-letter
  return d;
}

}  // namespace header

TEST(DocExamples, ConsumerHeaderExampleProcessesOnMemory) {
  header::shipped = 0;
  const idem::Decision d = header::run("memory:", {"parcel-1"});
  EXPECT_EQ(d.action, idem::Action::kAck);
  EXPECT_EQ(d.reason, idem::Reason::kProcessed);
  EXPECT_EQ(header::shipped, 1);
}

#ifdef IDEM_DOC_EXAMPLES_WITH_SQLITE
TEST(DocExamples, ConsumerHeaderExampleShipsOnceOnSqlite) {
  idem::testing::TempDir dir("doc-header");
  const std::string uri = "sqlite:" + dir.sub("idem.db");
  header::shipped = 0;
  EXPECT_EQ(header::run(uri, {"parcel-1"}).reason, idem::Reason::kProcessed);
  EXPECT_EQ(header::run(uri, {"parcel-1"}).reason, idem::Reason::kDuplicate);
  EXPECT_EQ(header::shipped, 1);
}
#endif

#ifdef IDEM_DOC_EXAMPLES_WITH_MACHINE
// --- docs/statemachines.md ---------------------------------------------------------

// Mirrors docs/statemachines.md, "Declaring a machine in C++" (and machine_dsl.hpp's
// example).
idem::TransitionTable dsl_example() {
  using namespace idem::dsl;
  idem::BuildResult product = idem::Machine("product")
                                  .initial("offline")
                                  .final_states({"deleted"})
                                  .max_retries(5)
                                  .backoff({idem::Duration(1000), 2.0, idem::Duration(60'000)})
                                  .rows({
                                      state("offline") + event("online") = state("online"),
                                      state("online") + event("offline") = state("offline"),
                                      row({"online", "offline"}, "delete", "deleted"),
                                  })
                                  .build();
  if (!product.ok()) die(product.format(idem::Severity::kError));  // what is wrong, and where
  const idem::TransitionTable& table = *product.table;
  return table;
}

TEST(DocExamples, StateMachineDslEqualsTheProductFile) {
  const idem::TransitionTable table = dsl_example();
  const idem::BuildResult file = idem::load_machine_file(IDEM_PRODUCT_YAML);
  ASSERT_TRUE(file.ok()) << file.format(idem::Severity::kError);
  EXPECT_TRUE(table == *file.table);
  EXPECT_EQ(table.check("offline", "online").verdict, idem::Verdict::kApply);
  EXPECT_EQ(table.check("deleted", "online").verdict, idem::Verdict::kNeverValid);
}

// Mirrors docs/statemachines.md, "Compile-time checks" (and machine_dsl.hpp's).
idem::BuildResult static_example() {
  constexpr idem::StaticRow kRows[] = {
      {"offline", "online", "online"},
      {"online", "offline", "offline"},
      {"online", "delete", "deleted"},
      {"offline", "delete", "deleted"},
  };
  constexpr std::string_view kFinals[] = {"deleted"};
  static_assert(idem::static_table_error(kRows, "offline", kFinals).empty());
  auto product = idem::Machine("product").initial("offline").final_states(kFinals).rows(kRows).build();
  return product;
}

TEST(DocExamples, StaticRowsBuildTheProductMachine) {
  const idem::BuildResult product = static_example();
  ASSERT_TRUE(product.ok()) << product.format(idem::Severity::kError);
  EXPECT_EQ(product.table->check("online", "online").verdict, idem::Verdict::kNotYetValid);
  EXPECT_EQ(product.table->check("online", "delete").verdict, idem::Verdict::kApply);
}

struct ProductEvent {
  std::string id;
  std::string product;
  std::string event;
};

// Mirrors docs/statemachines.md, "In a consumer", which loads "product.yaml".
void machine_in_consumer(const std::string& path, idem::ConsumerOptions& opts, idem::Extractors<ProductEvent>& x) {
  idem::BuildResult table = idem::load_machine_file(path);     // or the C++ DSL
  if (!table.ok()) die(table.format(idem::Severity::kError));  // FILE:LINE:COL: error: …
  opts.machine = idem::machine_gate(std::move(*table.table));  // machine_gate.hpp
  // the extractors it needs: the entity key and the event
  x.key = [](const ProductEvent& e) { return std::optional<std::string_view>(e.product); };
  x.event = [](const ProductEvent& e) { return std::optional<std::string_view>(e.event); };
}

// Mirrors statemachine/include/idem/machine_gate.hpp's example.
void machine_gate_header_example(const std::string& path, idem::ConsumerOptions& opts) {
  idem::BuildResult table = idem::load_machine_file(path);
  if (!table.ok()) die(table.format(idem::Severity::kError));
  opts.machine = idem::machine_gate(std::move(*table.table));
}

TEST(DocExamples, MachineInAConsumerGivesTheThreeAnswersOnMemory) {
  idem::ConsumerOptions opts;
  opts.store = idem::open_store("memory:").value();
  idem::Extractors<ProductEvent> x;
  x.id = [](const ProductEvent& e) { return std::optional<std::string_view>(e.id); };
  machine_in_consumer(IDEM_PRODUCT_YAML, opts, x);
  std::vector<std::string> transitions;
  auto consumer = idem::Consumer<ProductEvent>::create(opts, x, [&](const ProductEvent&, idem::HandlerContext& ctx) {
    transitions.push_back(std::string(ctx.from()) + "->" + std::string(ctx.to()));
    return idem::HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  EXPECT_EQ(consumer->process({"e1", "p1", "online"}).reason, idem::Reason::kProcessed);
  const idem::Decision early = consumer->process({"e2", "p1", "online"});  // not yet valid
  EXPECT_EQ(early.action, idem::Action::kRetry);
  EXPECT_EQ(early.reason, idem::Reason::kInvalidTransition);
  EXPECT_EQ(consumer->process({"e1", "p1", "online"}).reason, idem::Reason::kDuplicate);  // already applied
  EXPECT_EQ(consumer->process({"e3", "p1", "delete"}).reason, idem::Reason::kProcessed);
  const idem::Decision never = consumer->process({"e4", "p1", "offline"});  // never valid
  EXPECT_EQ(never.action, idem::Action::kDeadLetter);
  EXPECT_EQ(never.reason, idem::Reason::kInvalidTransition);
  EXPECT_EQ(transitions, (std::vector<std::string>{"offline->online", "online->deleted"}));
}

TEST(DocExamples, MachineGateHeaderExampleSetsTheGate) {
  idem::ConsumerOptions opts;
  machine_gate_header_example(IDEM_PRODUCT_YAML, opts);
  ASSERT_NE(opts.machine, nullptr);
  EXPECT_EQ(opts.machine->check("", "online").answer, idem::StateGate::Answer::kApply);
  EXPECT_EQ(opts.machine->max_retries(), 5u);
  EXPECT_THROW(machine_gate_header_example("/nonexistent/product.yaml", opts), Died);
}
#endif

// --- include/idem/backend/store_wrapper.hpp, the example at the top --------------------------

namespace wrapper {

class CountingStore final : public idem::StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  idem::Status commit(const idem::CommitRequest& r) override {
    ++commits;
    return StoreWrapper::commit(r);
  }
  std::atomic<int> commits{0};
};

}  // namespace wrapper

// --- include/idem/store_clock.hpp ---------------------------------------------------

// The header's snippet, on memory: (a one-host store, so the host's clock).
idem::ConsumerOptions store_clock_header_example(const std::string& uri) {
  idem::ConsumerOptions options;
  options.store = idem::open_store(uri).value();
  // A StoreClock here; system_clock() for a one-host store (SQLite, RocksDB, memory).
  options.clock = idem::clock_for(options.store).value();
  // Runtime::create then takes the consumer's clock too (RuntimeOptions::clock).
  return options;
}

TEST(DocExamples, StoreClockHeaderExampleGivesAOneHostStoreTheHostsClock) {
  const idem::ConsumerOptions o = store_clock_header_example("memory:");
  EXPECT_EQ(o.clock.get(), idem::system_clock().get());
}

TEST(DocExamples, StoreWrapperHeaderExampleCountsCommitsAndForwardsTheRest) {
  auto memory = idem::open_store("memory:");
  ASSERT_TRUE(memory.ok());
  wrapper::CountingStore counting(*memory);
  const idem::TimePoint t0{};
  const idem::Duration lease{1000};
  ASSERT_EQ(counting.claim({"m", "A", lease, std::nullopt, t0, std::nullopt})->status, idem::ClaimStatus::kNew);
  EXPECT_TRUE(counting.commit({"m", "A", std::nullopt, t0, lease, std::nullopt}).ok());
  EXPECT_EQ(counting.commits.load(), 1);
  EXPECT_EQ((*memory)->claim({"m", "B", lease, std::nullopt, t0, std::nullopt})->status, idem::ClaimStatus::kCompleted)
      << "the commit reached the wrapped store";
  EXPECT_NE(counting.entities(), nullptr) << "the wrapped store's entities";
}

// --- docs/runtime.md, a service over JSON messages ---------------------------------
#if defined(IDEM_DOC_EXAMPLES_WITH_BROKERS) && defined(IDEM_DOC_EXAMPLES_WITH_SQLITE)

namespace service {

void credit(sqlite3* db, const std::string&, std::int64_t) {
  if (db == nullptr) die("no transaction");
}
void park(const idem::BufferedOutcome&) {}

// Mirrors docs/runtime.md's program, which opens "sqlite:/var/lib/app/idem.db" and
// "amqp://app:secret@mq:5672/%2F?queue=payments".
void run(const std::string& store_uri, const std::string& source_uri) {
  auto format = idem::json::Format::create({.id = "/id", .key = "/account", .version = "/version"}).value();
  idem::ConsumerOptions opts;
  opts.store = idem::open_store(store_uri).value();
  opts.transactional = true;                     // the handler's rows commit with the record
  opts.ordering.mode = idem::Ordering::kStrict;  // per account, in version order
  opts.on_buffered = [](const idem::BufferedOutcome& b) {  // a payment that waited, and then
    if (b.decision.action == idem::Action::kDeadLetter) park(b);  // hit its retry cap or the gap policy
  };
  opts.outbox.publishers = idem::open_publisher;  // ctx.publish(URI, …) to any adapter's URI
  auto consumer = idem::Consumer<idem::json::Message>::create(
                      opts, format.extractors(),
                      [](const idem::json::Message& m, idem::HandlerContext& ctx) {
                        credit(idem::sqlite::connection(ctx), m.key, m.doc.at("amount").get<std::int64_t>());
                        return idem::HandlerResult::ok();
                      })
                      .value();
  auto source = idem::open_source(source_uri, {.lease = opts.lease});
  if (!source.ok()) die(source.status().to_string());  // names the broker, never the password
  idem::RuntimeOptions ro;
  ro.workers = 8;
  auto rt = idem::Runtime<idem::json::Message>::create(ro, **source, consumer, format.decoder()).value();
  idem::Status stopped = rt->run();  // until rt->stop(); else why it stopped
  if (!stopped.ok()) die(stopped.to_string());
}

}  // namespace service

TEST(DocExamples, RuntimeProgramBuildsItsConsumerAndNamesAnUnreachableBrokerWithoutItsPassword) {
  idem::testing::TempDir dir("doc-runtime");
  try {
    service::run("sqlite:" + dir.sub("idem.db"), "amqp://app:secret@127.0.0.1:1/%2F?queue=payments");
    FAIL() << "a broker on port 1 was reached";
  } catch (const Died& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1"), std::string::npos) << what;
    EXPECT_EQ(what.find("secret"), std::string::npos) << what;
  }
}
#endif

}  // namespace
