// SQLite-specific behaviour of the transactional outbox (the generic contract and the
// crash points are in tests/outbox/): the version-3 → 4 upgrade, sent entries removed
// at once, and what a commit with an outgoing message writes (one page more than
// without, docs/performance.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

// idem_outbox as schema version 3 laid it out, verbatim.
constexpr const char* kOutboxV3 =
    "DROP TABLE idem_outbox;"
    "CREATE TABLE idem_outbox(seq INTEGER PRIMARY KEY, incoming BLOB NOT NULL, position INTEGER NOT NULL,"
    " id BLOB NOT NULL, destination BLOB NOT NULL, body BLOB NOT NULL, headers BLOB NOT NULL,"
    " created_ms INTEGER NOT NULL, expires_ms INTEGER);"
    "CREATE INDEX idem_outbox_unsent ON idem_outbox(incoming, position) WHERE expires_ms IS NULL;"
    "UPDATE idem_meta SET value = 3 WHERE key = 'schema_version';";

std::vector<std::string> ids_of(const std::vector<OutboxEntry>& es) {
  std::vector<std::string> out;
  for (const auto& e : es) out.push_back(e.message.id + "=" + e.message.body);
  return out;
}

TEST(SqliteOutboxSchema, AVersion3FileKeepsItsUnsentEntriesAndDropsTheSentOnes) {
  TempDir dir;
  const auto path = dir.file("v3.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  const std::string at = std::to_string(to_unix_ms(t0()));
  ASSERT_EQ(raw_exec(path, std::string(kOutboxV3) +
                               "INSERT INTO idem_outbox VALUES(1, x'61', 0, x'612330', x'78', x'73656e74', x'', " + at +
                               ", " + at +
                               ");"  // a#0, sent
                               "INSERT INTO idem_outbox VALUES(2, x'61', 1, x'612331', x'78', x'31', x'', " +
                               at +
                               ", NULL);"  // a#1, unsent
                               "INSERT INTO idem_outbox VALUES(3, x'62', 0, x'622330', x'78', x'6f6c64', x'', " +
                               at +
                               ", NULL);"  // b#0 of an earlier commit of b
                               "INSERT INTO idem_outbox VALUES(4, x'62', 0, x'622330', x'78', x'6e6577', x'', " +
                               at + ", NULL);"),  // b#0 of b's later commit
            SQLITE_OK);
  {
    auto store = open_ok(options_for(path));
    ASSERT_NE(store, nullptr);
    OutboxQuery all;
    auto pending = store->outbox()->outbox_pending(all);
    ASSERT_TRUE(pending.ok()) << pending.status().to_string();
    EXPECT_EQ(ids_of(*pending), (std::vector<std::string>{"a#1=1", "b#0=new"}));
    EXPECT_EQ(to_unix_ms((*pending)[0].created_at), to_unix_ms(t0()));
  }
  EXPECT_EQ(raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(kSchemaVersion, 4);
  EXPECT_EQ(
      raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name IN ('idem_outbox_v3', 'idem_outbox_unsent')"),
      "0");
}

TEST(SqliteOutboxSchema, AVersion3FileWithAForeignOutboxIsDataLossAndLeftAlone) {
  TempDir dir;
  const auto path = dir.file("v3.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(raw_exec(path, std::string(kOutboxV3) + "DROP TABLE idem_outbox; CREATE TABLE idem_outbox(a, b);"),
            SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("idem_outbox"));
  EXPECT_EQ(raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'"), "3");
}

// --- what a commit writes -----------------------------------------------------------

class Sink final : public Publisher {
 public:
  Status publish(std::span<const OutgoingMessage>) override { return ok_status(); }
};

struct Msg {
  std::string id;
};

// Pages the store's connection wrote to the WAL while a transactional consumer
// processed `n` unique ids one by one, whose handler inserts one row into its own table
// and (outbox) publishes one message; counted from the first handler run to the run of
// one more message after a tick, so every commit and "sent" update is included.
int pages_for(const std::string& path, int n, bool outbox) {
  ConsumerOptions o;
  o.store = open_ok(options_for(path));
  if (o.store == nullptr) return -1;
  o.transactional = true;
  if (outbox)
    o.outbox.publishers = [](const std::string&) {
      return StatusOr<std::unique_ptr<Publisher>>(std::make_unique<Sink>());
    };
  int first = -1, last = -1;
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto c = Consumer<Msg>::create(o, x, [&](const Msg& m, HandlerContext& ctx) {
    sqlite3* db = connection(ctx);
    int current = 0, highest = 0;
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_WRITE, &current, &highest, 0);
    if (first < 0) first = current;
    last = current;
    const std::string sql = "INSERT INTO effects(id) VALUES('" + m.id + "')";
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return HandlerResult::fail("insert");
    if (outbox && !ctx.publish("sink://out", m.id).ok()) return HandlerResult::fail("publish");
    return HandlerResult::ok();
  });
  if (!c.ok()) return -1;
  for (int i = 0; i < n; ++i) {
    if (c->process(Msg{"id-" + std::to_string(i * 7919 % n)}).reason != Reason::kProcessed) return -1;
  }
  c->tick();
  if (c->process(Msg{"last"}).reason != Reason::kProcessed) return -1;
  return last - first;
}

TEST(SqliteOutboxCost, ACommitWithAnOutgoingMessageWritesAboutOnePageMore) {
  constexpr int kMessages = 400;
  TempDir dir;
  int pages[2];
  for (const bool outbox : {false, true}) {
    const auto path = dir.file(outbox ? "outbox.db" : "plain.db");
    ASSERT_EQ(raw_exec(path, "CREATE TABLE effects(id TEXT)"), SQLITE_OK);
    pages[outbox] = pages_for(path, kMessages, outbox);
    ASSERT_GT(pages[outbox], 0);
    if (outbox) {
      // Sent entries are removed at once: nothing of them is left.
      EXPECT_EQ(raw_query(path, "SELECT count(*) FROM idem_outbox"), "0");
    }
  }
  // The outbox table holds only the unsent entries: one page, which each commit's
  // insert and the deletion of the previous commit's sent entry share.
  const double extra = static_cast<double>(pages[1] - pages[0]) / kMessages;
  EXPECT_LE(extra, 1.2) << "pages without the outbox " << pages[0] << ", with " << pages[1];
}

}  // namespace
}  // namespace idem::sqlite::testing
