// The pieces the two-consumer ordering tests share: messages of one entity key
// ("order-1") that carry only a version, their extractors, and the stores to run on.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/consumer.hpp"

namespace idem::ordering_test {

struct VMsg {
  std::string id;
  std::uint64_t version = 0;
};

// Message "m<n>" with version n.
inline VMsg v(std::uint64_t n) { return {"m" + std::to_string(n), n}; }

inline Extractors<VMsg> extractors() {
  Extractors<VMsg> x;
  x.id = [](const VMsg& m) { return std::optional<std::string_view>(m.id); };
  x.key = [](const VMsg&) { return std::optional<std::string_view>("order-1"); };
  x.version = [](const VMsg& m) { return std::optional<std::uint64_t>(m.version); };
  x.encode = [](const VMsg& m) { return std::to_string(m.version); };
  x.decode = [](std::string_view s) -> std::optional<VMsg> {
    std::uint64_t n = 0;
    if (std::from_chars(s.data(), s.data() + s.size(), n).ec != std::errc()) return std::nullopt;
    return v(n);
  };
  return x;
}

// The store schemes of this build, for INSTANTIATE_TEST_SUITE_P.
inline constexpr const char* kStores[] = {
    "memory",
#ifdef IDEM_ORDERING_WITH_SQLITE
    "sqlite",
#endif
#ifdef IDEM_ORDERING_WITH_ROCKSDB
    "rocksdb",
#endif
#ifdef IDEM_TESTS_WITH_POSTGRES
    "postgres",
#endif
};

}  // namespace idem::ordering_test
