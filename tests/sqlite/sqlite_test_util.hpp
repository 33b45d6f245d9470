// Helpers for the SQLite store's own tests: temporary directories, child processes,
// raw access to the file.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "idem/sqlite_store.hpp"

namespace idem::sqlite::testing {

// A fresh directory under the system temp dir, removed (with its content) at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "idem-sqlite-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline Options options_for(const std::string& path, LeaseMode leases = LeaseMode::kLocal) {
  Options o;
  o.path = path;
  o.leases = leases;
  o.busy_timeout = Duration(2000);
  return o;
}

inline std::shared_ptr<Store> open_ok(const Options& o) {
  auto s = open(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

// The result of a child process: its exit code and what it wrote to its pipe.
struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;
};

// Runs `body` in a forked child whose stdout-like channel is the pipe fd it is given;
// the child exits with body's return value. Waits for it.
inline ChildResult run_child(const std::function<int(int fd)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const int code = body(fds[1]);
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// Runs one SQL statement on `path` through a separate plain connection. Returns the
// SQLite result code.
inline int raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open(path.c_str(), &db);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  }
  sqlite3_close(db);
  return rc;
}

// Returns the first column of the first row of `sql` on `path` as text, or "<error>".
inline std::string raw_query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out = "<error>";
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      const int rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        const unsigned char* t = sqlite3_column_text(st, 0);
        out = t ? reinterpret_cast<const char*>(t) : "";
      } else if (rc == SQLITE_DONE) {
        out = "";
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

inline TimePoint t0() { return from_unix_ms(1'700'000'000'000); }

inline ClaimRequest claim_req(std::string_view id, std::string_view owner, TimePoint now,
                              std::optional<std::uint64_t> fp = std::nullopt) {
  ClaimRequest q;
  q.id = id;
  q.owner = owner;
  q.lease = Duration(10'000);
  q.fingerprint = fp;
  q.now = now;
  return q;
}

inline CommitRequest commit_req(std::string_view id, std::string_view owner, TimePoint now,
                                std::optional<std::string_view> result = std::nullopt,
                                Outcome outcome = Outcome::kProcessed) {
  CommitRequest q;
  q.id = id;
  q.owner = owner;
  q.now = now;
  q.ttl = Duration(3'600'000);
  q.result = result;
  q.outcome = outcome;
  return q;
}

}  // namespace idem::sqlite::testing

namespace idem::sqlite::testing {

// Test-name suffix for a LeaseMode parameter.
inline std::string lease_mode_name(const ::testing::TestParamInfo<LeaseMode>& p) {
  return p.param == LeaseMode::kLocal ? "Local" : "Shared";
}

}  // namespace idem::sqlite::testing
