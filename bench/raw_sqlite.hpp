// The raw SQLite primitives and the naive per-message approach, on the same ids as
// the idem paths. Each call opens a fresh database at `path` (which must not exist),
// measures, closes it and deletes its files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "id_stream.hpp"
#include "path_result.hpp"

namespace idem::bench {

// The table the raw and naive paths write. Default: one B-tree keyed by the id, the
// smallest layout a dedup record can have (the strictest baseline).
struct RawTable {
  std::string create = "CREATE TABLE seen(id TEXT PRIMARY KEY) WITHOUT ROWID";
  std::string insert_or_ignore = "INSERT OR IGNORE INTO seen(id) VALUES(?1)";
  std::string insert = "INSERT INTO seen(id) VALUES(?1)";
  std::string select = "SELECT 1 FROM seen WHERE id = ?1";
};

// A copy of idem::sqlite's table (and, if with_expires_index, its expiry index), written
// with plain INSERT OR IGNORE of done records: what the layout alone costs.
RawTable idem_layout_table(bool with_expires_index);

struct RawOptions {
  std::int64_t cache_mib = 64;  // PRAGMA cache_size in MiB; default 64, as idem::sqlite
  int page_size = 0;            // PRAGMA page_size in bytes; 0 (default): SQLite's (4096)
  std::size_t batch = 1000;     // ids per transaction in run_raw_batched; default 1000
  bool sort_batch = false;      // run_raw_batched: insert each transaction's ids sorted
  int wal_autocheckpoint = 0;   // PRAGMA wal_autocheckpoint in pages; 0: SQLite's (1000)
  RawTable table;
};

// Per id: INSERT OR IGNORE, autocommit (one transaction each). WAL, synchronous=NORMAL.
PathResult run_raw_autocommit(const std::string& path, const Stream& s, const RawOptions& o);

// The same statement, o.batch ids per BEGIN … COMMIT.
PathResult run_raw_batched(const std::string& path, const Stream& s, const RawOptions& o);

// What a user would write without idem: per message SELECT to check, run the (no-op)
// handler, INSERT; each statement its own autocommit transaction. Same pragmas and
// table as the raw paths.
PathResult run_naive(const std::string& path, const Stream& s, const RawOptions& o);

// Removes path, path-wal, path-shm and path-journal if present.
void remove_database(const std::string& path);

}  // namespace idem::bench
