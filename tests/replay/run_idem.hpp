// Runs the built `idem` binary as a subprocess, for tests of its command-line contract.
#pragma once

#include <string>
#include <vector>

namespace idem::testing {

struct RunResult {
  int exit_code = -1;  // the exit status, or 128 + signal number
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr
};

// Runs `idem args…` with `stdin_text` as its standard input and waits for it. If the
// process cannot be started, records a test failure and returns exit_code -1.
RunResult run_idem(const std::vector<std::string>& args, const std::string& stdin_text = "");

// Splits text into lines without their '\n'; a final '\n' does not add an empty line.
std::vector<std::string> lines_of(const std::string& text);

// Joins lines, each followed by '\n': the form of a trace file.
std::string trace(const std::vector<std::string>& lines);

// A fresh empty directory, removed with its contents when the object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `content` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace idem::testing
