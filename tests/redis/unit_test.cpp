// The parts of idem::redis that need no server: slots, slot maps, redirections, URIs.
#include <gtest/gtest.h>

#include "cluster/cluster_executor.hpp"
#include "cluster/key_slot.hpp"
#include "cluster/slot_map.hpp"
#include "idem/open_store.hpp"
#include "idem/redis_store.hpp"
#include "redis_store_impl.hpp"

namespace idem::redis {
namespace {

using detail::Reply;

TEST(RedisKeySlot, MatchesTheClusterSpec) {
  EXPECT_EQ(detail::crc16("123456789"), 0x31C3);  // the spec's test vector
  EXPECT_EQ(detail::key_slot("foo"), 12182);      // CLUSTER KEYSLOT foo
  EXPECT_EQ(detail::key_slot("{user1000}.following"), detail::key_slot("{user1000}.followers"));
  EXPECT_EQ(detail::key_slot("{user1000}.following"), detail::key_slot("user1000"));
  EXPECT_EQ(detail::key_slot("foo{}{bar}"), detail::crc16("foo{}{bar}") % 16384) << "empty tag: whole key";
  EXPECT_EQ(detail::key_slot("foo{{bar}}zap"), detail::key_slot("{bar")) << "tag runs to the first }";
  EXPECT_EQ(detail::key_slot("foo{bar}{zap}"), detail::key_slot("bar"));
  EXPECT_EQ(detail::key_slot(std::string("a\0{b}", 5)), detail::key_slot("b"));
}

TEST(RedisKeySlot, StoreKeysOfOneIdShareTheIdAsTag) {
  // The layout of redis_store.hpp: <prefix>{<id>}; the tag is the id, whatever the prefix.
  const std::string id = "order-42";
  EXPECT_EQ(detail::key_slot("idem:{" + id + "}"), detail::key_slot(id));
  EXPECT_EQ(detail::key_slot("other-prefix:{" + id + "}"), detail::key_slot(id));
}

Reply str(std::string s) {
  Reply r;
  r.type = Reply::Type::kString;
  r.str = std::move(s);
  return r;
}
Reply num(std::int64_t v) {
  Reply r;
  r.type = Reply::Type::kInteger;
  r.integer = v;
  return r;
}
Reply arr(std::vector<Reply> e) {
  Reply r;
  r.type = Reply::Type::kArray;
  r.elements = std::move(e);
  return r;
}

TEST(RedisSlotMap, ParsesRedis7RepliesWithExtraFields) {
  // Redis 7: [start, end, [host, port, id, {hostname: …}], replica…]
  Reply meta = arr({str("hostname"), str("h1")});
  Reply reply = arr({
      arr({num(0), num(5460), arr({str("127.0.0.1"), num(7001), str("id1"), meta}),
           arr({str("127.0.0.1"), num(7004), str("id4"), arr({})})}),
      arr({num(5461), num(10922), arr({str(""), num(7002), str("id2")})}),
      arr({num(10923), num(16383), arr({str("?"), num(7003)})}),
  });
  auto m = detail::SlotMap::parse(reply, {"127.0.0.9", 7002});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->covered(), 16384);
  EXPECT_EQ(m->master_of(0)->port, 7001);
  EXPECT_EQ(m->master_of(5460)->port, 7001);
  EXPECT_EQ(m->master_of(5461)->port, 7002);
  EXPECT_EQ(m->master_of(5461)->host, "127.0.0.9") << "empty host: the node that answered";
  EXPECT_EQ(m->master_of(16383)->host, "127.0.0.9") << "\"?\" host: the node that answered";
  ASSERT_EQ(m->nodes().size(), 4u);
  EXPECT_EQ(m->nodes().back().port, 7004) << "replicas come after masters";
}

TEST(RedisSlotMap, PartialCoverageAndBadShapes) {
  auto partial = detail::SlotMap::parse(arr({arr({num(10), num(19), arr({str("127.0.0.1"), num(1)})})}), {"x", 1});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->covered(), 10);
  EXPECT_FALSE(partial->master_of(9).has_value());
  EXPECT_EQ(detail::SlotMap::parse(str("nope"), {"x", 1}).status().code(), StatusCode::kInternal);
  EXPECT_FALSE(detail::SlotMap::parse(arr({arr({num(5), num(2), arr({str("h"), num(1)})})}), {"x", 1}).ok());
  EXPECT_FALSE(detail::SlotMap::parse(arr({arr({num(0), num(16384), arr({str("h"), num(1)})})}), {"x", 1}).ok());
  EXPECT_FALSE(detail::SlotMap::parse(arr({arr({num(0), num(1), arr({str("h"), num(0)})})}), {"x", 1}).ok());
}

TEST(RedisRedirect, ParsesMovedAndAsk) {
  auto m = detail::parse_redirect("MOVED 3999 127.0.0.1:6381", {"127.0.0.1", 1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->to.host, "127.0.0.1");
  EXPECT_EQ(m->to.port, 6381);
  auto a = detail::parse_redirect("ASK 1 :7000", {"127.0.0.2", 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->to.host, "127.0.0.2") << "empty host: the node that answered";
  EXPECT_FALSE(detail::parse_redirect("MOVED", {"h", 1}).has_value());
  EXPECT_FALSE(detail::parse_redirect("MOVED 99999 h:1", {"h", 1}).has_value());
  EXPECT_FALSE(detail::parse_redirect("MOVED 1 h:0", {"h", 1}).has_value());
  EXPECT_FALSE(detail::parse_redirect("MOVED 1 nohost", {"h", 1}).has_value());
}

StatusOr<Options> parse(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  return parse_uri(*u);
}

TEST(RedisUri, ParsesEveryPart) {
  auto o = parse(
      "redis://alice:p%40ss:w@127.0.0.1:6390/3?prefix=app%3Adedup%3A&connect_timeout_ms=250"
      "&command_timeout_ms=300&wait_replicas=1&wait_timeout_ms=40&pool_max_idle=4&expiry_slack_ms=7");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "alice");
  EXPECT_EQ(o->password, "p@ss:w");
  ASSERT_EQ(o->endpoints.size(), 1u);
  EXPECT_EQ(o->endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(o->endpoints[0].port, 6390);
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->prefix, "app:dedup:");
  EXPECT_EQ(o->connect_timeout, Duration(250));
  EXPECT_EQ(o->command_timeout, Duration(300));
  EXPECT_EQ(o->wait_replicas, 1);
  EXPECT_EQ(o->wait_timeout, Duration(40));
  EXPECT_EQ(o->pool_max_idle, 4u);
  EXPECT_EQ(o->expiry_slack, Duration(7));
  EXPECT_FALSE(o->cluster);

  auto pw = parse("redis://secret@h:1");
  ASSERT_TRUE(pw.ok());
  EXPECT_EQ(pw->password, "secret");
  EXPECT_TRUE(pw->user.empty());

  auto c = parse("redis://127.0.0.1:7000,127.0.0.1:7001?cluster=true");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cluster);
  EXPECT_EQ(c->endpoints.size(), 2u);
}

TEST(RedisUri, BadUrisAreInvalidArguments) {
  for (const char* bad :
       {"redis:host:1", "redis://", "redis://host", "redis://host:", "redis://host:0", "redis://host:70000",
        "redis://host:12x", "redis://host:1/x", "redis://host:1/-1", "redis://host:1?unknown=1",
        "redis://host:1?cluster=maybe", "redis://host:1?wait_replicas=-1", "redis://user:@host:1", "redis://:1"}) {
    auto o = parse(bad);
    EXPECT_FALSE(o.ok()) << bad;
    if (!o.ok()) {
      EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad << ": " << o.status().to_string();
    }
  }
}

// Found by the store_records fuzz target: a bare "IDEMCORRUPT" error reply (no
// message after the code) read past the reply's end.
TEST(RedisReplies, ErrorRepliesOfAnyLengthAreStatuses) {
  for (const std::string msg : {"IDEMCORRUPT", "IDEMCORRUPT ", "IDEMCORRUPT bad record", "", "WRONGTYPE", "OOM"}) {
    const Status s = detail::error_status(msg, "idem:{k}");
    EXPECT_FALSE(s.ok()) << msg;
    EXPECT_NE(s.message().find("idem:{k}"), std::string::npos) << s.message();
  }
  EXPECT_EQ(detail::error_status("IDEMCORRUPT", "k").code(), StatusCode::kDataLoss);
}

TEST(RedisOpen, RejectsBadOptionsBeforeConnecting) {
  Options o;
  o.endpoints = {{"127.0.0.1", 1}};
  o.prefix = "app:{x}:";
  auto s = open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("prefix"), std::string::npos) << s.status().to_string();

  o.prefix = "ok:";
  o.cluster = true;
  o.db = 2;
  EXPECT_EQ(open(o).status().code(), StatusCode::kInvalidArgument) << "a cluster has only db 0";
  o.cluster = false;
  o.db = 0;
  o.endpoints.push_back({"127.0.0.1", 2});
  EXPECT_EQ(open(o).status().code(), StatusCode::kInvalidArgument) << "two servers without cluster";
  o.endpoints.pop_back();
  o.user = "alice";
  EXPECT_EQ(open(o).status().code(), StatusCode::kInvalidArgument) << "a user without a password";
  EXPECT_EQ(open(Options{}).status().code(), StatusCode::kInvalidArgument) << "no endpoint";
}

TEST(RedisOpen, UnreachableServerIsUnavailableAndOpenStoreKnowsTheScheme) {
  // Port 1 on loopback: nothing listens there, the connect is refused at once.
  auto s = open_store("redis://127.0.0.1:1?connect_timeout_ms=200");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().to_string();
  auto bad = open_store("redis://127.0.0.1:1?prefix=%7Bx%7D");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem::redis
