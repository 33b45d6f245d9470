// The store conformance suite against a private PostgreSQL server (one per process),
// each test in a schema of its own, dropped with the location.
#include <libpq-fe.h>

#include <string>

#include "conformance/store_conformance.hpp"
#include "idem/postgres_store.hpp"
#include "support/postgres_server.hpp"

namespace idem::conformance {
namespace {

using postgres_test::shared_server;

class PostgresLocation final : public StoreLocation {
 public:
  PostgresLocation() : schema_(postgres_test::fresh_schema()) {}
  ~PostgresLocation() override {
    if (shared_server() == nullptr) return;
    PGconn* c = PQconnectdb(
        ("host=127.0.0.1 user=idem dbname=postgres port=" + std::to_string(shared_server()->port())).c_str());
    PQsetNoticeProcessor(
        c, [](void*, const char*) {}, nullptr);
    PQclear(PQexec(c, ("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE").c_str()));
    PQfinish(c);
  }

  StatusOr<std::shared_ptr<Store>> open(FaultHook hook) override {
    if (shared_server() == nullptr) return unavailable("no PostgreSQL server");
    postgres::Options o;
    o.connection = shared_server()->connection();
    o.schema = schema_;
    o.pool_size = 4;
    o.fault_hook = std::move(hook);
    return postgres::open(o);
  }

 private:
  std::string schema_;
};

StoreFactory postgres_factory() {
  StoreFactory f;
  f.name = "postgres";
  f.capabilities.durable = true;
  f.capabilities.shared = true;
  f.capabilities.fault_hook = true;
  f.capabilities.entities = true;
  f.new_location = [] { return std::make_unique<PostgresLocation>(); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformance, ::testing::Values(postgres_factory()), factory_name);

}  // namespace
}  // namespace idem::conformance
