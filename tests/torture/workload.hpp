// The crash torture's workload, made the same by the driver and the test from a seed:
// entity keys whose versions carry the product machine's events (odd versions
// "online", even ones "offline", the last of every fifth key "delete"), interleaved
// across keys at random, some versions swapped with the next (out of order), a
// quarter of the messages sent again later (duplicates), and some that fail on their
// first attempt.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support/entity_messages.hpp"

namespace idem::torture {

inline constexpr std::uint32_t kSeed = 20261201;

struct WorkloadShape {
  int keys = 250;
  int versions = 64;  // per key: 16,000 distinct messages, 20,000 deliveries
};

inline std::string key_name(int k) { return "k" + std::to_string(k); }

inline std::string event_of(int key, int version, int versions) {
  if (version == versions && key % 5 == 0) return "delete";
  return version % 2 == 1 ? "online" : "offline";
}

// True for the messages whose handler fails on the first attempt (1 in 25).
inline bool fails_first(const std::string& id) { return std::hash<std::string>{}(id) % 25 == 0; }

// The final state of key k: what a run without crashes leaves.
inline std::string final_state(int key, int versions) {
  if (key % 5 == 0) return "deleted";
  return versions % 2 == 1 ? "online" : "offline";
}

inline std::vector<test::EntityMsg> make_workload(std::uint32_t seed, WorkloadShape shape = {}) {
  std::mt19937 rng(seed);
  std::vector<test::EntityMsg> out, sent;
  std::vector<int> next(shape.keys, 1);
  int left = shape.keys * shape.versions;
  auto message = [&](int k, int v) {
    test::EntityMsg m = test::versioned(key_name(k) + "-v" + std::to_string(v), key_name(k), v);
    m.event = event_of(k, v, shape.versions);
    return m;
  };
  while (left > 0) {
    const int k = static_cast<int>(rng() % shape.keys);
    if (next[k] > shape.versions) continue;
    const int v = next[k]++;
    std::vector<int> versions{v};
    if (v < shape.versions && rng() % 10 == 0) versions = {next[k]++, v};  // v+1 overtakes v
    for (int ver : versions) {
      out.push_back(message(k, ver));
      sent.push_back(out.back());
      --left;
      if (rng() % 4 == 0) out.push_back(sent[sent.size() - 1 - rng() % std::min<std::size_t>(sent.size(), 400)]);
    }
  }
  return out;
}

}  // namespace idem::torture
