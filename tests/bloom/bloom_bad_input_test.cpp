// Bloom options that cannot be met, and snapshots: round trip, atomic replace, and
// files that are truncated, corrupt, foreign or written with other options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "idem/bloom_store.hpp"
#include "idem/open_store.hpp"

#include "support/temp_dir.hpp"

namespace idem {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const TimePoint kT0 = from_unix_ms(1'700'000'000'000);

using idem::testing::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool contains(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

TEST(BloomBadInput, OptionsThatCannotBeMet) {
  struct Case {
    bloom::Options o;
    std::string names;
  };
  const Case cases[] = {
      {{.capacity = 0}, "capacity"},
      {{.fp = 0}, "fp"},
      {{.fp = 1}, "fp"},
      {{.fp = 1.5}, "fp"},
      {{.fp = -0.1}, "fp"},
      {{.window = milliseconds(0)}, "window"},
      {{.window = milliseconds(-5)}, "window"},
      {{.generations = 0}, "generations"},
      {{.generations = 65}, "generations"},
      {{.capacity = 1'000'000'000'000ULL, .fp = 1e-9}, "libbloom"},
  };
  for (const auto& c : cases) {
    auto s = bloom::open(c.o);
    ASSERT_FALSE(s.ok()) << c.names;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().to_string();
    EXPECT_TRUE(contains(s.status(), c.names)) << s.status().to_string();
  }
  for (const char* uri :
       {"bloom:?capacity=0", "bloom:?fp=1", "bloom:?fp=abc", "bloom:?window=0", "bloom:?window=-1h", "bloom:?window=5x",
        "bloom:?window=-999999999919999999d", "bloom:?window=9999999999999999999d",
        "bloom:?generations=0", "bloom:?colour=red", "bloom+rocksdb:/tmp/x?capacity=0", "bloom+nothing:/tmp/x"}) {
    auto s = open_store(uri);
    ASSERT_FALSE(s.ok()) << uri;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << uri << ": " << s.status().to_string();
  }
}

TEST(BloomSnapshot, RoundTripKeepsTheWindowAcrossARestart) {
  TempDir dir{"bloom"};
  const std::string path = dir.sub("filters.snap");
  const bloom::Options o{.capacity = 10'000, .fp = 0.001, .window = milliseconds(60'000), .snapshot_path = path};
  {
    auto s = bloom::open(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    for (int i = 0; i < 5000; ++i)
      ASSERT_TRUE(
          (*s)->commit({"id-" + std::to_string(i), "A", std::nullopt, kT0 + milliseconds(i), Duration(1), std::nullopt})
              .ok());
    ASSERT_TRUE((*s)->snapshot().ok());
    EXPECT_TRUE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + ".tmp")) << "the temporary file is renamed over the snapshot";
    ASSERT_TRUE((*s)->commit({"after-snapshot", "A", std::nullopt, kT0, Duration(1), std::nullopt}).ok());
  }  // destroyed: writes the snapshot again
  auto s = bloom::open(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const TimePoint later = kT0 + milliseconds(30'000);
  for (int i = 0; i < 5000; ++i) {
    auto c = (*s)->claim({"id-" + std::to_string(i), "B", milliseconds(1000), std::nullopt, later});
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->status, ClaimStatus::kCompleted) << i;
  }
  EXPECT_EQ((*s)->claim({"after-snapshot", "B", milliseconds(1000), std::nullopt, later})->status,
            ClaimStatus::kCompleted);
  EXPECT_EQ((*s)->claim({"never", "B", milliseconds(1000), std::nullopt, later})->status, ClaimStatus::kNew);
}

TEST(BloomSnapshot, BadSnapshotsAreRejectedAndLeftAsTheyWere) {
  TempDir dir{"bloom"};
  const std::string path = dir.sub("filters.snap");
  const bloom::Options o{.capacity = 10'000, .fp = 0.001, .window = milliseconds(60'000), .snapshot_path = path};
  {
    auto s = bloom::open(o);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->commit({"x", "A", std::nullopt, kT0, Duration(1), std::nullopt}).ok());
  }
  const std::string good = read_file(path);
  ASSERT_GT(good.size(), 100u);

  auto expect_refused = [&](const std::string& bytes, StatusCode code, const std::string& why,
                            const bloom::Options& opts) {
    write_file(path, bytes);
    auto s = bloom::open(opts);
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_EQ(s.status().code(), code) << s.status().to_string();
    EXPECT_TRUE(contains(s.status(), why)) << s.status().to_string();
    EXPECT_TRUE(contains(s.status(), path)) << "names the file: " << s.status().to_string();
    EXPECT_EQ(read_file(path), bytes) << "a refused snapshot is not overwritten";
  };
  expect_refused(good.substr(0, good.size() / 2), StatusCode::kDataLoss, "truncated", o);
  expect_refused(good.substr(0, 20), StatusCode::kDataLoss, "truncated", o);
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  expect_refused(flipped, StatusCode::kDataLoss, "corrupt", o);
  expect_refused("SQLite format 3\0 and more bytes than a header", StatusCode::kDataLoss, "not an idem bloom snapshot",
                 o);
  expect_refused(good + "extra", StatusCode::kDataLoss, "trailing", o);
  bloom::Options other = o;
  other.capacity = 20'000;
  expect_refused(good, StatusCode::kFailedPrecondition, "other options", other);
  other = o;
  other.window = milliseconds(120'000);
  expect_refused(good, StatusCode::kFailedPrecondition, "other options", other);

  // The good file still opens.
  write_file(path, good);
  auto s = bloom::open(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->claim({"x", "B", milliseconds(1000), std::nullopt, kT0})->status, ClaimStatus::kCompleted);
}

TEST(BloomSnapshot, UnwritableSnapshotIsAnErrorAndKeepsThePreviousFile) {
  TempDir dir{"bloom"};
  auto nowhere = bloom::open({.capacity = 1000, .snapshot_path = dir.sub("missing-dir/filters.snap")});
  ASSERT_TRUE(nowhere.ok()) << "an absent snapshot is an empty window";
  Status s = (*nowhere)->snapshot();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  auto none = bloom::open({.capacity = 1000});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->snapshot().code(), StatusCode::kFailedPrecondition);
  auto dir_as_file = bloom::open({.capacity = 1000, .snapshot_path = dir.sub("")});
  EXPECT_EQ(dir_as_file.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
