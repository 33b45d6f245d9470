// Exit statuses of the idem command, the same for every subcommand.
#pragma once

namespace idem::cli {

inline constexpr int kExitOk = 0;        // the run completed (whatever its decisions were)
inline constexpr int kExitFailure = 1;   // the run could not go on: store or input unusable
inline constexpr int kExitUsage = 2;     // invalid command line, option values or store URI
inline constexpr int kExitNotFound = 3;  // inspect, purge: the store has no such id or key

}  // namespace idem::cli
