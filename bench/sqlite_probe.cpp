#include "sqlite_probe.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace idem::bench {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

struct State {
  std::mutex mu;
  std::unordered_map<sqlite3_stmt*, std::uint64_t> started;  // stmt → start time
  std::unordered_map<std::string, StatementStats> by_sql;
  ProbeReport io;
};

State& state() {
  static State* s = new State;  // never destroyed: connections may outlive main's locals
  return *s;
}

// --- statement tracing ---------------------------------------------------------------

int on_trace(unsigned type, void*, void* p, void*) {
  auto* stmt = static_cast<sqlite3_stmt*>(p);
  const std::uint64_t t = now_ns();
  State& s = state();
  std::lock_guard lock(s.mu);
  if (type == SQLITE_TRACE_STMT) {
    s.started[stmt] = t;
  } else if (type == SQLITE_TRACE_PROFILE) {
    auto it = s.started.find(stmt);
    if (it == s.started.end()) return 0;
    const char* sql = sqlite3_sql(stmt);
    StatementStats& st = s.by_sql[sql ? sql : "?"];
    if (st.sql.empty()) st.sql = sql ? sql : "?";
    ++st.runs;
    st.nanos += t - it->second;
    s.started.erase(it);
  }
  return 0;
}

int trace_connection(sqlite3* db, char**, const sqlite3_api_routines*) {
  sqlite3_trace_v2(db, SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE, on_trace, nullptr);
  return SQLITE_OK;
}

// --- the counting VFS shim -----------------------------------------------------------

sqlite3_vfs* g_real = nullptr;
bool g_installed = false;
sqlite3_vfs g_vfs;

enum class Kind { kMainDb, kWal, kOther };

struct ProbeFile {
  sqlite3_file base;
  sqlite3_file* real;  // follows this struct in the same allocation
  Kind kind;
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<ProbeFile*>(f)->real; }
Kind kind_of(sqlite3_file* f) { return reinterpret_cast<ProbeFile*>(f)->kind; }

int x_close(sqlite3_file* f) {
  sqlite3_file* r = real_of(f);
  return r->pMethods ? r->pMethods->xClose(r) : SQLITE_OK;
}
int x_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  {
    std::lock_guard lock(state().mu);
    if (kind_of(f) == Kind::kMainDb) ++state().io.db_reads;
    if (kind_of(f) == Kind::kWal) ++state().io.wal_reads;
  }
  return real_of(f)->pMethods->xRead(real_of(f), buf, n, off);
}
int x_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  const std::uint64_t t0 = now_ns();
  const int rc = real_of(f)->pMethods->xWrite(real_of(f), buf, n, off);
  const std::uint64_t t1 = now_ns();
  {
    std::lock_guard lock(state().mu);
    ProbeReport& io = state().io;
    if (kind_of(f) == Kind::kWal) {
      io.wal_bytes += static_cast<std::uint64_t>(n);
      // A frame header is written on its own: 24 bytes after the 32-byte WAL header;
      // bytes 4..7 (the database size after commit) are non-zero on a commit frame.
      if (n == 24 && off >= 32) {
        ++io.wal_frames;
        const auto* b = static_cast<const unsigned char*>(buf);
        if (b[4] | b[5] | b[6] | b[7]) ++io.wal_commits;
      }
    } else if (kind_of(f) == Kind::kMainDb) {
      io.db_bytes_written += static_cast<std::uint64_t>(n);
    }
    io.write_nanos += t1 - t0;
  }
  return rc;
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) { return real_of(f)->pMethods->xTruncate(real_of(f), size); }
int x_sync(sqlite3_file* f, int flags) {
  const std::uint64_t t0 = now_ns();
  const int rc = real_of(f)->pMethods->xSync(real_of(f), flags);
  const std::uint64_t t1 = now_ns();
  std::lock_guard lock(state().mu);
  ++state().io.syncs;
  state().io.sync_nanos += t1 - t0;
  return rc;
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) { return real_of(f)->pMethods->xFileSize(real_of(f), size); }
int x_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out); }
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device_chars(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
int x_shm_map(sqlite3_file* f, int pg, int sz, int extend, void volatile** p) {
  return real_of(f)->pMethods->xShmMap(real_of(f), pg, sz, extend, p);
}
int x_shm_lock(sqlite3_file* f, int off, int n, int flags) {
  return real_of(f)->pMethods->xShmLock(real_of(f), off, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); }
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return real_of(f)->pMethods->xFetch(real_of(f), off, n, p);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

const sqlite3_io_methods kMethods = {
    3,          x_close,       x_read,           x_write,        x_truncate,    x_sync,         x_file_size,
    x_lock,     x_unlock,      x_check_reserved, x_file_control, x_sector_size, x_device_chars, x_shm_map,
    x_shm_lock, x_shm_barrier, x_shm_unmap,      x_fetch,        x_unfetch};

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  auto* pf = reinterpret_cast<ProbeFile*>(f);
  pf->real = reinterpret_cast<sqlite3_file*>(pf + 1);
  pf->kind = (flags & SQLITE_OPEN_MAIN_DB) ? Kind::kMainDb : (flags & SQLITE_OPEN_WAL) ? Kind::kWal : Kind::kOther;
  const int rc = g_real->xOpen(g_real, name, pf->real, flags, out_flags);
  // Methods must be set even on failure if the real file has them (SQLite calls xClose).
  pf->base.pMethods = pf->real->pMethods ? &kMethods : nullptr;
  return rc;
}

int x_delete(sqlite3_vfs*, const char* n, int sync) { return g_real->xDelete(g_real, n, sync); }
int x_access(sqlite3_vfs*, const char* n, int flags, int* out) { return g_real->xAccess(g_real, n, flags, out); }
int x_full_pathname(sqlite3_vfs*, const char* n, int sz, char* out) {
  return g_real->xFullPathname(g_real, n, sz, out);
}
void* x_dlopen(sqlite3_vfs*, const char* n) { return g_real->xDlOpen(g_real, n); }
void x_dlerror(sqlite3_vfs*, int n, char* msg) { g_real->xDlError(g_real, n, msg); }
void (*x_dlsym(sqlite3_vfs*, void* h, const char* sym))(void) { return g_real->xDlSym(g_real, h, sym); }
void x_dlclose(sqlite3_vfs*, void* h) { g_real->xDlClose(g_real, h); }
int x_randomness(sqlite3_vfs*, int n, char* out) { return g_real->xRandomness(g_real, n, out); }
int x_sleep(sqlite3_vfs*, int us) { return g_real->xSleep(g_real, us); }
int x_current_time(sqlite3_vfs*, double* t) { return g_real->xCurrentTime(g_real, t); }
int x_last_error(sqlite3_vfs*, int n, char* s) { return g_real->xGetLastError(g_real, n, s); }
int x_current_time64(sqlite3_vfs*, sqlite3_int64* t) { return g_real->xCurrentTimeInt64(g_real, t); }

}  // namespace

void install_probe() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_real = sqlite3_vfs_find(nullptr);
    std::memset(&g_vfs, 0, sizeof g_vfs);
    g_vfs.iVersion = 2;
    g_vfs.szOsFile = static_cast<int>(sizeof(ProbeFile)) + g_real->szOsFile;
    g_vfs.mxPathname = g_real->mxPathname;
    g_vfs.zName = "idem-bench-probe";
    g_vfs.xOpen = x_open;
    g_vfs.xDelete = x_delete;
    g_vfs.xAccess = x_access;
    g_vfs.xFullPathname = x_full_pathname;
    g_vfs.xDlOpen = x_dlopen;
    g_vfs.xDlError = x_dlerror;
    g_vfs.xDlSym = x_dlsym;
    g_vfs.xDlClose = x_dlclose;
    g_vfs.xRandomness = x_randomness;
    g_vfs.xSleep = x_sleep;
    g_vfs.xCurrentTime = x_current_time;
    g_vfs.xGetLastError = x_last_error;
    g_vfs.xCurrentTimeInt64 = x_current_time64;
    sqlite3_vfs_register(&g_vfs, 1);
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(trace_connection));
    g_installed = true;
  });
}

bool probe_installed() { return g_installed; }

void probe_reset() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.started.clear();
  s.by_sql.clear();
  s.io = ProbeReport{};
}

ProbeReport probe_report() {
  State& s = state();
  std::lock_guard lock(s.mu);
  ProbeReport r = s.io;
  for (auto& [sql, st] : s.by_sql) {
    r.statements.push_back(st);
    r.statement_nanos += st.nanos;
  }
  std::sort(r.statements.begin(), r.statements.end(),
            [](const StatementStats& a, const StatementStats& b) { return a.nanos > b.nanos; });
  return r;
}

void print_probe(const std::string& label, const ProbeReport& r, std::uint64_t messages) {
  const double m = static_cast<double>(messages);
  std::uint64_t runs = 0;
  for (const auto& st : r.statements) runs += st.runs;
  std::printf("profile: %s\n", label.c_str());
  std::printf(
      "  per message: %.2f statements, %.3f write transactions, %.2f WAL frames (pages), "
      "%.0f WAL bytes, %.0f db bytes checkpointed, %.3f db reads; %llu syncs in all\n",
      static_cast<double>(runs) / m, static_cast<double>(r.wal_commits) / m, static_cast<double>(r.wal_frames) / m,
      static_cast<double>(r.wal_bytes) / m, static_cast<double>(r.db_bytes_written) / m,
      static_cast<double>(r.db_reads) / m, static_cast<unsigned long long>(r.syncs));
  if (r.wal_commits > 0)
    std::printf("  per write transaction: %.1f pages dirtied\n",
                static_cast<double>(r.wal_frames) / static_cast<double>(r.wal_commits));
  std::printf(
      "  time inside statements: %.2f s (%.2f us per message; WAL checkpoints run after a statement "
      "ends and are not in it); all xWrite %.2f s, all xSync %.2f s\n",
      static_cast<double>(r.statement_nanos) * 1e-9, static_cast<double>(r.statement_nanos) * 1e-3 / m,
      static_cast<double>(r.write_nanos) * 1e-9, static_cast<double>(r.sync_nanos) * 1e-9);
  for (const auto& st : r.statements) {
    if (st.runs == 0) continue;
    std::string sql = st.sql;
    for (char& c : sql)
      if (c == '\n' || c == '\t') c = ' ';
    if (sql.size() > 90) sql = sql.substr(0, 87) + "...";
    std::printf("  %8.3f/msg %8.2f us/run %7.2f s  %s\n", static_cast<double>(st.runs) / m,
                static_cast<double>(st.nanos) * 1e-3 / static_cast<double>(st.runs),
                static_cast<double>(st.nanos) * 1e-9, sql.c_str());
  }
  std::printf("\n");
}

}  // namespace idem::bench
