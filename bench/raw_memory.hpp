// The raw in-memory primitive: what a dedup filter costs with nothing around it.
#pragma once

#include "id_stream.hpp"
#include "path_result.hpp"

namespace idem::bench {

// Per message: std::unordered_set<std::string>::insert of the id (no reserve, like a
// store that does not know the stream's size); a failed insert is a duplicate.
PathResult run_raw_hash_set(const Stream& s);

}  // namespace idem::bench
