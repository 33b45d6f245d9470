// The statistics of a Bloom store reached as a plain Store (through open_store, which
// returns no typed handle): the handle's own stats() once cast back to it.
#pragma once

#include <memory>

#include "idem/bloom_store.hpp"

namespace idem::bloom_test {

inline StatusOr<bloom::Stats> stats_of(Store& s) {
  if (auto* f = dynamic_cast<bloom::FilterStore*>(&s)) return f->stats();
  if (auto* f = dynamic_cast<bloom::FrontStore*>(&s)) return f->stats();
  return invalid_argument("not a bloom store");
}

}  // namespace idem::bloom_test
