// --profile: where SQLite time goes, measured from outside the store. Installs (once)
//   - an auto-extension that traces every connection opened afterwards
//     (sqlite3_trace_v2: each statement's runs and the time from its first step to
//     its end; an auto-checkpoint runs after its statement ends and is not in it), and
//   - a VFS shim over the default VFS that counts WAL frames, commit frames, bytes
//     written to the WAL and the database file, reads and syncs.
// Neither changes what SQLite does; both add a little time to every statement.
// Not thread-safe against concurrent probe_reset()/probe_report().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace idem::bench {

struct StatementStats {
  std::string sql;          // the statement's text as prepared
  std::uint64_t runs = 0;   // times it ran (first step to reset or completion)
  std::uint64_t nanos = 0;  // total time inside it
};

struct ProbeReport {
  std::vector<StatementStats> statements;  // most time first
  std::uint64_t wal_frames = 0;            // pages appended to the WAL
  std::uint64_t wal_commits = 0;           // commit frames (= write transactions)
  std::uint64_t wal_bytes = 0;
  std::uint64_t db_bytes_written = 0;      // checkpoints copying pages into the database
  std::uint64_t db_reads = 0;              // reads of the database file (page-cache misses)
  std::uint64_t wal_reads = 0;
  std::uint64_t syncs = 0;                 // xSync calls on any file
  std::uint64_t sync_nanos = 0;            // time inside xSync (fsync/fdatasync)
  std::uint64_t write_nanos = 0;           // time inside xWrite (WAL and database)
  std::uint64_t statement_nanos = 0;       // sum over statements (auto-checkpoints excluded)
};

// Installs the probe; affects connections opened after the call. Idempotent.
void install_probe();
// Returns true iff install_probe() was called.
bool probe_installed();
// Forgets everything counted so far.
void probe_reset();
// Returns what was counted since the last reset.
ProbeReport probe_report();
// Prints a report for a path that fed `messages` deliveries.
void print_probe(const std::string& label, const ProbeReport& r, std::uint64_t messages);

}  // namespace idem::bench
