// Helpers shared by the redis test binaries.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

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

}  // namespace idem::redis_test

namespace idem::redis_test {

// redis::open of a URI string.
inline StatusOr<std::shared_ptr<Store>> open_store_uri(const std::string& uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  return redis::open(*u);
}

}  // namespace idem::redis_test
