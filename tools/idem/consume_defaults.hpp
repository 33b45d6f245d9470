// What `idem consume` chooses when no flag says, so that a restart neither forgets its
// records nor waits for its own leases (tools/idem/README.md, "Defaults").
#pragma once

#include <string>

#include "idem/status.hpp"

namespace idem::cli {

// The folder for what outlives a run: $STATE_DIRECTORY (systemd's StateDirectory=),
// else $XDG_STATE_HOME/idem, else $HOME/.local/state/idem. Created if missing.
StatusOr<std::string> state_directory();

// What names a source's consumer group across runs: the scheme, host, port and path,
// and its group, durable, subscription, queue or stream, without user, password or any
// other parameter (so a changed timeout or TLS file keeps it). kInvalidArgument for a
// URI that does not parse.
StatusOr<std::string> source_identity(const std::string& source);

// "sqlite:<state directory>/consume-<identity as a file name>-<hash>.db?leases=shared":
// the store of a consume without --store, one per source and group, which the
// consumers of that group on this host share.
StatusOr<std::string> default_store_uri(const std::string& source);

// A consumer name for `source` that is the same after a restart and unique among the
// processes of this host: "<host>-<n>" for the lowest n whose lock file
// (<state directory>/consumers/<identity hash>.<n>.lock) this process can lock. The
// lock is held until the process exits.
StatusOr<std::string> take_consumer_name(const std::string& source);

}  // namespace idem::cli
