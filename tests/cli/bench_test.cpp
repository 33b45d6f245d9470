// `idem bench` on memory: and sqlite: with a small stream: one BENCH line per row,
// every row finding the stream's duplicates (exit 0) in every round of --repeat, usage
// errors exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_store.hpp"

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

}  // namespace
}  // namespace idem::testing
