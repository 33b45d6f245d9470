// The store conformance suite against one real redis-server (started per process).
#include <gtest/gtest.h>

#include "redis_conformance.hpp"
#include "support/redis_server.hpp"

namespace idem::redis_test {

std::string standalone_uri() {
  static std::unique_ptr<RedisServer> server = [] {
    auto s = RedisServer::start({});
    if (!s.ok()) {
      ADD_FAILURE() << s.status().to_string();
      return std::unique_ptr<RedisServer>();
    }
    return std::move(s).value();
  }();
  return server ? server->uri() : "redis://127.0.0.1:1";
}

}  // namespace idem::redis_test

namespace idem::conformance {
INSTANTIATE_TEST_SUITE_P(Redis, StoreConformance,
                         ::testing::Values(redis_test::redis_factory("standalone", redis_test::standalone_uri)),
                         factory_name);
}  // namespace idem::conformance
