// Helpers of the PostgreSQL store's tests: plain libpq connections to the private
// server, outside the store.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <string>

#include "support/postgres_server.hpp"

namespace idem::postgres_test {

// A libpq connection to the shared server (database postgres, user idem).
class Raw {
 public:
  Raw() {
    PostgresServer* s = shared_server();
    c_ = PQconnectdb(("host=127.0.0.1 user=idem dbname=postgres port=" + std::to_string(s ? s->port() : 1)).c_str());
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
  }
  ~Raw() { PQfinish(c_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  // Runs sql; returns the first column of the first row as text ("" if none), or
  // "ERROR: …".
  std::string query(const std::string& sql) {
    PGresult* r = PQexec(c_, sql.c_str());
    std::string out;
    const auto st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      out = std::string("ERROR: ") + PQresultErrorMessage(r);
    } else if (PQntuples(r) > 0 && PQnfields(r) > 0) {
      out = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return out;
  }

 private:
  PGconn* c_;
};

}  // namespace idem::postgres_test
