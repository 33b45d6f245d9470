// idem::json::Format: fields from JSON pointers, headers and the broker's id; errors
// that name the field; a consumer over json::Message, through the reorder buffer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/json_format.hpp"
#include "idem/memory_store.hpp"
#ifdef IDEM_JSON_TEST_WITH_SQLITE
#include "idem/sqlite_store.hpp"
#include "support/temp_dir.hpp"
#endif

namespace idem::json {
namespace {

Delivery delivery(std::string body) {
  Delivery d;
  d.body = std::move(body);
  d.broker_id = "1700000000000-0";
  d.partition = "orders";
  d.position = 7;
  d.delivery_count = 2;
  d.headers = {{"message-id", "h-1"}, {"type", "credited"}};
  return d;
}

Format format(Fields f) {
  auto fmt = Format::create(std::move(f));
  EXPECT_TRUE(fmt.ok()) << fmt.status().to_string();
  return std::move(fmt).value();
}

TEST(JsonFormat, ReadsPointersIntoTheBody) {
  const Format f = format({.id = "/order/id", .key = "/account", .version = "/version", .event = "/type"});
  auto m = f.read(delivery(R"({"order":{"id":"o-1"},"account":"acc-9","version":3,"type":"paid","amount":5})"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->id, "o-1");
  EXPECT_EQ(m->key, "acc-9");
  EXPECT_EQ(m->version, 3u);
  EXPECT_EQ(m->event, "paid");
  EXPECT_EQ(m->doc.at("amount").get<int>(), 5);
  EXPECT_EQ(m->partition, "orders");
  EXPECT_EQ(m->position, 7u);
  const MessageView v = f.extractors().view(*m);
  EXPECT_EQ(v.id, "o-1");
  EXPECT_EQ(v.key, "acc-9");
  EXPECT_EQ(v.version, 3u);
  EXPECT_EQ(v.event, "paid");
  EXPECT_EQ(v.payload, m->body);
  EXPECT_EQ(v.stream, "orders");
  EXPECT_EQ(v.position, 7u);
  EXPECT_EQ(v.delivery_count, 2u);
}

TEST(JsonFormat, IntegersAreReadAsDecimalTextAndVersionsFromDigitStrings) {
  const Format f = format({.id = "/id", .key = "/account", .version = "/version"});
  auto m = f.read(delivery(R"({"id":18446744073709551615,"account":-4,"version":"12"})"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->id, "18446744073709551615");
  EXPECT_EQ(m->key, "-4");
  EXPECT_EQ(m->version, 12u);
}

TEST(JsonFormat, ReadsHeadersAndTheBrokerId) {
  const Format by_header = format({.id = "header:message-id", .event = "header:type"});
  auto m = by_header.read(delivery("not json at all"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->id, "h-1");
  EXPECT_EQ(m->event, "credited");
  EXPECT_TRUE(m->doc.is_null());  // no field reads the body, so it need not be JSON
  auto b = format({.id = "broker"}).read(delivery("{}"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id, "1700000000000-0");
  EXPECT_FALSE(format({.id = "header:absent"}).read(delivery("{}")).ok());
}

TEST(JsonFormat, AMissingOrMistypedFieldIsAnErrorNamingItAndNotTheBody) {
  const Format f = format({.id = "/id", .key = "/account", .version = "/version"});
  struct Case {
    const char* body;
    const char* names;
  };
  for (const Case& c : {Case{R"({"account":"a","version":1,"secret":"s3cr3t"})", "id (/id)"},
                        Case{R"({"id":"x","account":{"n":1},"version":1,"secret":"s3cr3t"})", "key (/account)"},
                        Case{R"({"id":"x","account":"a","version":-1,"secret":"s3cr3t"})", "version (/version)"},
                        Case{R"({"id":"x","account":"a","version":"1e3","secret":"s3cr3t"})", "version (/version)"},
                        Case{R"({"id":true,"account":"a","version":1,"secret":"s3cr3t"})", "id (/id)"},
                        Case{R"(["id","s3cr3t"])", "id (/id)"}}) {
    auto m = f.read(delivery(c.body));
    ASSERT_FALSE(m.ok()) << c.body;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.names), std::string::npos) << m.status().message();
    EXPECT_EQ(m.status().message().find("s3cr3t"), std::string::npos) << m.status().message();
  }
  auto not_json = f.read(delivery(R"({"id":"x", s3cr3t)"));
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.status().message(), "the body is not JSON");
}

TEST(JsonFormat, RefusesSpecsOfNoKnownForm) {
  for (const Fields& f : {Fields{.id = ""}, Fields{.id = "id"}, Fields{.id = "/id", .key = "broker"},
                          Fields{.id = "header:"}, Fields{.id = "/a~2b"}, Fields{.id = "/id", .version = "$.v"}}) {
    auto fmt = Format::create(f);
    ASSERT_FALSE(fmt.ok()) << f.id << " " << f.key << " " << f.version;
    EXPECT_EQ(fmt.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(JsonFormat, TheDecoderIsRead) {
  const Format f = format({.id = "/id"});
  auto decode = f.decoder();
  EXPECT_EQ(decode(delivery(R"({"id":"a"})"))->id, "a");
  EXPECT_FALSE(decode(delivery(R"({"ID":"a"})")).ok());
}

// What the handler saw of each message it ran.
struct Seen {
  std::string id, key;
  std::uint64_t version;
  int amount;
};

StatusOr<Consumer<Message>> consumer_over(std::shared_ptr<Store> store, const Format& f, std::vector<Seen>& seen) {
  ConsumerOptions o;
  o.store = std::move(store);
  o.ordering.mode = Ordering::kStrict;
  o.on_buffered = [](const BufferedOutcome&) {};
  return Consumer<Message>::create(o, f.extractors(), [&seen](const Message& m, HandlerContext&) {
    seen.push_back({m.id, m.key, m.version, m.doc.at("amount").get<int>()});
    return HandlerResult::ok();
  });
}

TEST(JsonFormat, AConsumerOverJsonMessagesDropsCopiesAndRefusesAChangedPayload) {
  const Format f = format({.id = "/id", .key = "/account", .version = "/version"});
  std::vector<Seen> seen;
  auto c = consumer_over(memory::open().value(), f, seen);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto m1 = f.read(delivery(R"({"id":"a","account":"k","version":1,"amount":5})")).value();
  EXPECT_EQ(c->process(m1).reason, Reason::kProcessed);
  EXPECT_EQ(c->process(m1).reason, Reason::kDuplicate);
  auto changed = f.read(delivery(R"({"id":"a","account":"k","version":1,"amount":6})")).value();
  EXPECT_EQ(c->process(changed).reason, Reason::kPayloadConflict);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].amount, 5);
}

#ifdef IDEM_JSON_TEST_WITH_SQLITE
TEST(JsonFormat, MessagesLeaveTheDurableReorderBufferWhole) {
  idem::testing::TempDir dir("json");
  const Format f = format({.id = "/id", .key = "/account", .version = "/version"});
  std::vector<Seen> seen;
  auto c = consumer_over(sqlite::open(sqlite::Options{.path = dir.sub("idem.db")}).value(), f, seen);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto m2 = f.read(delivery(R"({"id":"b","account":"k","version":2,"amount":20})")).value();
  auto m1 = f.read(delivery(R"({"id":"a","account":"k","version":1,"amount":10})")).value();
  EXPECT_EQ(c->process(m2).reason, Reason::kBuffered);
  EXPECT_EQ(c->process(m1).reason, Reason::kProcessed);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].id, "b");
  EXPECT_EQ(seen[1].key, "k");
  EXPECT_EQ(seen[1].version, 2u);
  EXPECT_EQ(seen[1].amount, 20);  // decoded from the buffer, body parsed again
}
#endif

}  // namespace
}  // namespace idem::json
