// The URI of a fresh store of `scheme` for the tests that run on every store: memory:, a file or
// folder at `path` (sqlite, rocksdb), or a schema of its own on the binary's private
// PostgreSQL server (postgres).
#pragma once

#include <string>

#ifdef IDEM_TESTS_WITH_POSTGRES
#include "support/postgres_server.hpp"
#endif

namespace idem::test_support {

inline std::string store_uri(const std::string& scheme, const std::string& path) {
  if (scheme == "memory") return "memory:";
#ifdef IDEM_TESTS_WITH_POSTGRES
  if (scheme == "postgres") {
    auto* server = postgres_test::shared_server();
    if (server == nullptr) return "postgres://idem@127.0.0.1:1/no-server";
    return server->uri("?schema=" + postgres_test::fresh_schema());
  }
#endif
  return scheme + ":" + path;
}

}  // namespace idem::test_support
