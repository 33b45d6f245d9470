// The Bloom store's probe (stores/bloom/src/probe.hpp) sets and tests exactly the bits
// libbloom 1.6 does: filters written by either stay readable by the other, so
// snapshots keep their meaning.
#include "probe.hpp"

#include <bloom.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace idem::bloom::detail {
namespace {

// Ids of every length min_len..63, bytes 0..255 (NUL and non-UTF-8 included).
std::vector<std::string> random_ids(std::size_t n, std::uint64_t seed, std::size_t min_len = 0) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> ids(n);
  for (auto& id : ids) {
    id.resize(min_len + rng() % (64 - min_len));
    for (auto& c : id) c = static_cast<char>(rng() & 0xff);
  }
  return ids;
}

struct LibbloomFilter {
  LibbloomFilter(int entries, double error) { EXPECT_EQ(bloom_init(&b, entries, error), 0); }
  ~LibbloomFilter() { bloom_free(&b); }
  struct bloom b {};
};

TEST(BloomProbe, SetsTheBitsLibbloomSets) {
  for (const auto& [entries, error] : {std::pair{1000, 0.01}, {50'000, 0.0002}, {200'000, 0.1}}) {
    LibbloomFilter ref(entries, error), ours(entries, error);
    const Geometry g(static_cast<std::uint32_t>(ours.b.bits), static_cast<std::uint32_t>(ours.b.hashes));
    int added_ref = 0, added_ours = 0;
    for (const auto& id : random_ids(static_cast<std::size_t>(entries), entries)) {
      added_ref += bloom_add(&ref.b, id.data(), static_cast<int>(id.size())) == 0;
      added_ours += g.set(ours.b.bf, probe_of(id));
    }
    EXPECT_EQ(added_ours, added_ref) << "set() reports 'added' exactly when bloom_add does";
    ASSERT_EQ(ref.b.bytes, ours.b.bytes);
    EXPECT_EQ(std::memcmp(ref.b.bf, ours.b.bf, static_cast<std::size_t>(ref.b.bytes)), 0)
        << "entries " << entries << " error " << error << ": the bit arrays differ";
    // Lookups of unseen ids (mostly absent, some false positives) agree too: 8 random
    // bytes or more, so that none was added.
    int positives = 0;
    for (const auto& id : random_ids(100'000, entries + 1, 8)) {
      const bool lib = bloom_check(&ref.b, id.data(), static_cast<int>(id.size())) == 1;
      ASSERT_EQ(g.test(ours.b.bf, probe_of(id)), lib);
      const unsigned char* one[] = {ours.b.bf};
      ASSERT_EQ(g.test_any(one, 1, probe_of(id)), lib);
      positives += lib;
    }
    EXPECT_LT(positives, 100'000 * error * 2) << "a filter at capacity answers mostly 'absent'";
  }
}

TEST(BloomProbe, TestAnyFindsAnIdInAnyOfSeveralFilters) {
  constexpr int kEntries = 10'000;
  std::vector<std::unique_ptr<LibbloomFilter>> filters;
  for (int i = 0; i < 5; ++i) filters.push_back(std::make_unique<LibbloomFilter>(kEntries, 0.001));
  const Geometry g(static_cast<std::uint32_t>(filters[0]->b.bits), static_cast<std::uint32_t>(filters[0]->b.hashes));
  const auto ids = random_ids(5 * kEntries, 7);
  for (std::size_t i = 0; i < ids.size(); ++i)
    bloom_add(&filters[i % 5]->b, ids[i].data(), static_cast<int>(ids[i].size()));
  for (const auto& id : ids) {
    const unsigned char* all[5];
    for (int k = 0; k < 5; ++k) all[k] = filters[k]->b.bf;
    ASSERT_TRUE(g.test_any(all, 5, probe_of(id))) << "an added id is never missed";
  }
  int positives = 0, lib_positives = 0;
  for (const auto& id : random_ids(50'000, 8, 8)) {
    const unsigned char* all[5];
    for (int k = 0; k < 5; ++k) all[k] = filters[k]->b.bf;
    bool lib = false;
    for (auto& f : filters) lib |= bloom_check(&f->b, id.data(), static_cast<int>(id.size())) == 1;
    const bool ours = g.test_any(all, 5, probe_of(id));
    ASSERT_EQ(ours, lib);
    positives += ours;
    lib_positives += lib;
  }
  EXPECT_EQ(positives, lib_positives);
  const unsigned char* none[1] = {nullptr};
  EXPECT_FALSE(g.test_any(none, 0, probe_of("x"))) << "no filter: nothing may hold the id";
}

TEST(BloomProbe, ModuloIsExactForEveryBitCount) {
  std::mt19937_64 rng(3);
  for (std::uint32_t bits : {1u, 2u, 7u, 8u, 1000u, 65'537u, 2'147'483'647u, 4'294'967'295u}) {
    const Geometry g(bits, 1);
    for (std::uint32_t x : {0u, 1u, bits - 1, bits, 4'294'967'295u}) ASSERT_EQ(g.mod(x), x % bits) << bits << " " << x;
    for (int i = 0; i < 100'000; ++i) {
      const auto x = static_cast<std::uint32_t>(rng());
      ASSERT_EQ(g.mod(x), x % bits) << bits << " " << x;
    }
  }
}

}  // namespace
}  // namespace idem::bloom::detail
