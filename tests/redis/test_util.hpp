// Helpers shared by the redis test binaries.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "idem/redis_store.hpp"
#include "support/redis_server.hpp"

namespace idem::redis_test {

// Options for a store on `uri` with a prefix unique to this test, or a failed test.
inline redis::Options options_for(const std::string& uri) {
  auto u = StoreUri::parse(uri);
  EXPECT_TRUE(u.ok()) << u.status().to_string();
  auto o = redis::parse_uri(*u);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  o->prefix = std::string("t:") + (info ? info->name() : "none") + ":";
  return *o;
}

inline std::shared_ptr<redis::RedisStore> open_or_die(const redis::Options& o) {
  auto s = redis::open(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The key of id's record (of id claimed with entity_key) in a store of redis::open.
inline std::string key_of(const redis::RedisStore& store, std::string_view id) { return store.record_key(id); }
inline std::string key_of(const redis::RedisStore& store, std::string_view id, std::string_view entity_key) {
  return store.record_key(id, entity_key).value();
}

// One standalone server started for each test (127.0.0.1, a free port, stopped by
// PID), options for a store on it with the test's own prefix, and that store.
class WithRedisServer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = RedisServer::start({});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
    options_ = options_for(server_->uri());
    store_ = open_or_die(options_);
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<RedisServer> server_;
  redis::Options options_;
  std::shared_ptr<redis::RedisStore> store_;
};

}  // namespace idem::redis_test

namespace idem::redis_test {

// redis::open of a URI string.
inline StatusOr<std::shared_ptr<Store>> open_store_uri(const std::string& uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  return redis::open(*u);
}

}  // namespace idem::redis_test
