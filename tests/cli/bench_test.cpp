// `idem bench` on memory: and sqlite: with a small stream: one BENCH line per row,
// every row finding the stream's duplicates (exit 0) in every round of --repeat, usage
// errors exit 2; --source: its usage errors, and the renaming of destinations (the
// broker runs are in each adapter's tests, support/bench_source_check.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_store.hpp"

#ifdef IDEM_CLI_WITH_BROKERS
#include "idem/open_source.hpp"
#endif

namespace idem::testing {
namespace {

// The BENCH lines of `out`, by path, checked for the documented fields.
std::map<std::string, std::string> bench_lines(const std::string& out, const std::string& store) {
  const std::regex line("BENCH store=" + store +
                        " path=([a-z_]+) threads=1 msgs_per_s=[0-9]+ p50_us=[0-9.]+ p99_us=[0-9.]+");
  std::map<std::string, std::string> by_path;
  for (const std::string& l : lines_of(out)) {
    if (l.rfind("BENCH ", 0) != 0) continue;
    std::smatch m;
    EXPECT_TRUE(std::regex_match(l, m, line)) << l;
    if (!m.empty()) by_path[m[1]] = l;
  }
  return by_path;
}

void expect_rows(const std::map<std::string, std::string>& lines, const std::vector<std::string>& paths) {
  EXPECT_EQ(lines.size(), paths.size());
  for (const std::string& p : paths) EXPECT_EQ(lines.count(p), 1u) << "no BENCH line for " << p;
}

TEST(IdemBench, MemoryPrintsEveryRowAndPassesItsCountCheck) {
  const RunResult r = run_idem({"bench", "--store", "memory:", "--messages", "20000", "--batch", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("20000 deliveries (18000 distinct ids, 2000 re-sent)"), std::string::npos) << r.out;
  expect_rows(bench_lines(r.out, "memory"), {"raw", "raw_batch", "naive", "single", "batch"});
}

TEST(IdemBench, SqlitePrintsEveryRowAndLeavesNoRawDatabase) {
  TempDir dir;
  const std::string db = dir.path() + "/bench.db";
  const RunResult r =
      run_idem({"bench", "--store", "sqlite:" + db, "--messages", "3000", "--batch", "500", "--duplicates", "0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("3000 deliveries (2400 distinct ids, 600 re-sent)"), std::string::npos) << r.out;
  expect_rows(bench_lines(r.out, "sqlite"), {"raw", "raw_batch", "naive", "single", "batch"});
  // A second run on the same store sees only new ids: it passes its count check too.
  EXPECT_EQ(run_idem({"bench", "--store", "sqlite:" + db, "--messages", "1000"}).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(db + ".raw-bench")) << "the raw rows' database is removed";
}

// --repeat runs every round on ids of its own: an SQLite store that kept the first
// round's records would find the second round's ids done and fail the count check.
TEST(IdemBench, RepeatRunsEveryRoundOnFreshIdsAndShowsOneLinePerRow) {
  TempDir dir;
  const std::string db = dir.path() + "/bench.db";
  const RunResult r = run_idem({"bench", "--store", "sqlite:" + db, "--messages", "2000", "--batch", "200", "--repeat",
                                "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("median of 3 rounds"), std::string::npos) << r.out;
  expect_rows(bench_lines(r.out, "sqlite"), {"raw", "raw_batch", "naive", "single", "batch"});
}

TEST(IdemBench, InvalidOptionsExitTwo) {
  EXPECT_EQ(run_idem({"bench", "--repeat", "0"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--duplicates", "1.5"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--batch", "0"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--store", "nosuchscheme"}).exit_code, 2);
}

TEST(IdemBench, SourceOptionsOutOfRangeExitTwo) {
  EXPECT_EQ(run_idem({"bench", "--workers", "4"}).exit_code, 2) << "--workers needs --source";
  EXPECT_EQ(run_idem({"bench", "--handler-ms", "1"}).exit_code, 2) << "--handler-ms needs --source";
#ifdef IDEM_CLI_WITH_BROKERS
  const std::string uri = "redis-stream://127.0.0.1:1/s?group=g";
  EXPECT_EQ(run_idem({"bench", "--source", "nosuch://h/t"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--source", uri, "--workers", "0"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--source", uri, "--batch", "0"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--source", uri, "--handler-ms", "-1"}).exit_code, 2);
  EXPECT_EQ(run_idem({"bench", "--source", uri, "--store", "nosuchscheme"}).exit_code, 2);
  // Valid, with nothing listening: the broker failure is exit 1 and one line.
  const RunResult r = run_idem({"bench", "--source", "redis-stream://:s3cret@127.0.0.1:1/s?group=g"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
#endif
}

#ifdef IDEM_CLI_WITH_BROKERS
// Every destination name gets the suffix; consumer names and other parameters do not.
TEST(IdemBench, DestinationSuffixRenamesEveryDestinationAndNothingElse) {
  auto s = [](const std::string& uri) { return with_destination_suffix(uri, "-x").value(); };
  EXPECT_EQ(s("redis-stream://:pw@h:1/orders?group=g&dlq=dead"), "redis-stream://:pw@h:1/orders-x?group=g&dlq=dead-x");
  EXPECT_EQ(s("redis-stream://h:1/orders"), "redis-stream://h:1/orders-x");
  EXPECT_FALSE(with_destination_suffix("redis-stream://h:1", "-x").ok());
  EXPECT_FALSE(with_destination_suffix("nosuch://h/t", "-x").ok());
#ifdef IDEM_CLI_WITH_RABBITMQ
  EXPECT_EQ(s("amqp://u:p@h:1/%2F?queue=q&prefetch=5&dlq=d"), "amqp://u:p@h:1/%2F?queue=q-x&prefetch=5&dlq=d-x");
#endif
#ifdef IDEM_CLI_WITH_NATS
  EXPECT_EQ(s("nats://h:1?stream=S&durable=D&subject=a.b&dlq_stream=Z"),
            "nats://h:1?stream=S-x&durable=D&subject=a.b-x&dlq_stream=Z-x");
#endif
}
#endif

}  // namespace
}  // namespace idem::testing
