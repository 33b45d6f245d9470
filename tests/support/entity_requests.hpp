// Builders of the entity requests of the store contract (include/idem/entity.hpp), for
// the conformance suite and the stores' own tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "idem/entity.hpp"

namespace idem::testing {

inline EntityWrite ew(std::string_view key, std::uint64_t expect, std::optional<std::uint64_t> version,
                      std::optional<std::string_view> state = std::nullopt,
                      std::optional<std::uint64_t> unbuffer = std::nullopt) {
  EntityWrite w;
  w.key = key;
  w.expect_revision = expect;
  w.version = version;
  w.state = state;
  w.unbuffer = unbuffer;
  return w;
}

inline BufferPut bp(std::string_view key, std::uint64_t version, std::string_view id, std::string_view message,
                    TimePoint now, BufferLimits limits = {}) {
  BufferPut p;
  p.key = key;
  p.version = version;
  p.id = id;
  p.message = message;
  p.now = now;
  p.limits = limits;
  return p;
}

}  // namespace idem::testing
