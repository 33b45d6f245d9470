// `idem bench` on memory: the raw primitive is a std::unordered_set<std::string>.
#include <string>
#include <unordered_set>

#include "bench_rows.hpp"

namespace idem::cli {
namespace {

using IdSet = std::unordered_set<std::string>;

// The handler the naive row calls, kept opaque to the optimiser.
const std::function<void(const Msg&)> noop_handler = [](const Msg&) {};

// raw (chunk 1) and raw_batch (chunk = batch): one insert per id, a failed insert is
// a duplicate. No reserve, like a store that does not know the stream's size.
BenchRow inserts(const std::string& path, std::size_t chunk) {
  auto set = std::make_shared<IdSet>();
  BenchRow row{path, chunk, nullptr, set};
  row.step = [s = set.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    for (const Msg& m : ms) ++(s->insert(m.id).second ? c.processed : c.duplicates);
  };
  return row;
}

// naive: check, handle, insert.
BenchRow naive() {
  auto set = std::make_shared<IdSet>();
  BenchRow row{"naive", 1, nullptr, set};
  row.step = [s = set.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    for (const Msg& m : ms) {
      if (s->count(m.id) != 0) {
        ++c.duplicates;
        continue;
      }
      noop_handler(m);
      s->insert(m.id);
      ++c.processed;
    }
  };
  return row;
}

}  // namespace

std::vector<RowFactory> memory_rows(const BenchSetup& s) {
  const std::size_t batch = s.batch;
  return {[] { return inserts("raw", 1); }, [batch] { return inserts("raw_batch", batch); }, [] { return naive(); }};
}

}  // namespace idem::cli
