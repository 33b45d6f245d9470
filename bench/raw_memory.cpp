#include "raw_memory.hpp"

#include <string>
#include <unordered_set>

namespace idem::bench {

PathResult run_raw_hash_set(const Stream& s) {
  PathResult r;
  {
    std::unordered_set<std::string> seen;
    Stopwatch sw;
    for (const Msg& m : s.messages) {
      if (seen.insert(m.id).second)
        ++r.processed;
      else
        ++r.duplicates;
    }
    sw.stop_into(r);
  }
  r.messages = s.messages.size();
  return r;
}

}  // namespace idem::bench
