// postgres:// URIs: what goes to libpq and what idem keeps, the schema name, passwords
// kept out of errors, and the schema-version check.
#include <gtest/gtest.h>

#include <string>

#include "idem/open_store.hpp"
#include "idem/postgres_store.hpp"
#include "pg_test_util.hpp"

namespace idem::postgres_test {
namespace {

std::string value_of(const postgres::Options& o, const std::string& key) {
  for (const auto& [k, v] : o.connection)
    if (k == key) return v;
  return "<absent>";
}

// Options for `schema` on the binary's private server. REQUIRES: shared_server().
postgres::Options options_in(const std::string& schema) {
  postgres::Options o;
  o.connection = shared_server()->connection();
  o.schema = schema;
  return o;
}

StatusOr<postgres::Options> parse(const std::string& uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  return postgres::parse_uri(*u);
}

TEST(PostgresUri, ThePartsGoToLibpqAndIdemsParametersAreTakenOut) {
  auto o = parse("postgres://alice:s%40cr%3At@db.example:6543/app?schema=my-app&sslmode=require&pool=3");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(value_of(*o, "user"), "alice");
  EXPECT_EQ(value_of(*o, "password"), "s@cr:t");
  EXPECT_EQ(value_of(*o, "host"), "db.example");
  EXPECT_EQ(value_of(*o, "port"), "6543");
  EXPECT_EQ(value_of(*o, "dbname"), "app");
  EXPECT_EQ(value_of(*o, "sslmode"), "require");
  EXPECT_EQ(value_of(*o, "schema"), "<absent>") << "idem's own parameter never reaches libpq";
  EXPECT_EQ(value_of(*o, "pool"), "<absent>");
  EXPECT_EQ(o->schema, "my-app");
  EXPECT_EQ(o->pool_size, 3u);
}

TEST(PostgresUri, ASocketFolderAndPostgresqlSchemeAndDefaults) {
  auto o = parse("postgresql://bob@/app?host=/run/pg");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(value_of(*o, "host"), "/run/pg");
  EXPECT_EQ(value_of(*o, "user"), "bob");
  EXPECT_EQ(value_of(*o, "password"), "<absent>");
  EXPECT_EQ(o->schema, "idem");
  auto v6 = parse("postgres://u@[::1]:5433/d");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(value_of(*v6, "host"), "::1");
  EXPECT_EQ(value_of(*v6, "port"), "5433");
}

TEST(PostgresUri, BadUrisAndSchemaNamesAreRefused) {
  EXPECT_EQ(parse("postgres:app").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse("postgres://u@h:port/d").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse("postgres://u@h/d?pool=0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse("postgres://u@h/d?dbname=x%3Dy").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse("postgres://u@h/d?schema=").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(parse("postgres://u@h/d?schema=" + std::string(63, 's')).ok());
  EXPECT_EQ(parse("postgres://u@h/d?schema=" + std::string(64, 's')).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(postgres::quote_identifier("a\"b-c"), "\"a\"\"b-c\"");
}

TEST(PostgresUri, APasswordIsNeverInAnError) {
  for (const std::string uri :
       {"postgres://idem:hunter2@127.0.0.1:1/postgres", "postgresql://:hunter2@127.0.0.1:1/x"}) {
    auto s = open_store(uri);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(s.status().message().find("hunter2"), std::string::npos) << s.status().message();
  }
}

TEST(PostgresUri, OpenStoreCreatesAQuotedSchemaAndReopensIt) {
  ASSERT_NE(shared_server(), nullptr);
  Raw raw;
  const std::string schema = "My-Schema." + fresh_schema();
  const std::string uri = shared_server()->uri("?schema=" + schema);
  {
    auto s = open_store(uri);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ClaimRequest q{"id-1", "A", Duration(1000), std::nullopt, from_unix_ms(1000)};
    EXPECT_EQ((*s)->claim(q)->status, ClaimStatus::kNew);
  }
  EXPECT_EQ(raw.query("SELECT count(*) FROM \"" + schema + "\".idem_records"), "1");
  auto again = open_store("postgresql" + uri.substr(std::string("postgres").size()));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  raw.query("DROP SCHEMA \"" + schema + "\" CASCADE");
}

TEST(PostgresSchema, ANewerSchemaVersionIsRefusedClearly) {
  ASSERT_NE(shared_server(), nullptr);
  Raw raw;
  const std::string schema = fresh_schema();
  postgres::Options o = options_in(schema);
  ASSERT_TRUE(postgres::open(o).ok());
  EXPECT_EQ(raw.query("SELECT value FROM " + schema + ".idem_meta WHERE key = 'schema_version'"),
            std::to_string(postgres::kSchemaVersion));
  raw.query("UPDATE " + schema + ".idem_meta SET value = 99 WHERE key = 'schema_version'");
  auto s = postgres::open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("99"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("upgrade idem"), std::string::npos) << s.status().message();
  raw.query("DROP SCHEMA " + schema + " CASCADE");
}

TEST(PostgresSchema, ASchemaOfVersionTwoIsUpgradedAtOpen) {
  ASSERT_NE(shared_server(), nullptr);
  Raw raw;
  const std::string schema = fresh_schema();
  postgres::Options o = options_in(schema);
  const TimePoint now = from_unix_ms(1'700'000'000'000);
  {
    auto store = postgres::open(o).value();
    ASSERT_TRUE(store->claim({"old", "me", Duration{60'000}, std::nullopt, now}).ok());
  }
  const std::string reloptions =
      "SELECT reloptions::text FROM pg_class WHERE oid = '" + schema + ".idem_records'::regclass";
  EXPECT_EQ(raw.query(reloptions), "{fillfactor=45}");
  // What a build of version 2 wrote: pages of idem_records filled to 70%.
  raw.query("ALTER TABLE " + schema + ".idem_records SET (fillfactor = 70)");
  raw.query("UPDATE " + schema + ".idem_meta SET value = 2 WHERE key = 'schema_version'");
  auto store = postgres::open(o).value();
  EXPECT_EQ(raw.query("SELECT value FROM " + schema + ".idem_meta WHERE key = 'schema_version'"), "3");
  EXPECT_EQ(raw.query(reloptions), "{fillfactor=45}");
  EXPECT_EQ(store->inspect("old", now).value()->state, RecordState::kInProgress) << "the records are kept";
  EXPECT_EQ(raw.query("SELECT count(*) FROM " + schema + ".idem_outbox"), "0") << "the outbox is kept";
  store.reset();
  raw.query("DROP SCHEMA " + schema + " CASCADE");
}

}  // namespace
}  // namespace idem::postgres_test
