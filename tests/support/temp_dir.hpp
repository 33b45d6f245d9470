// A fresh directory under the system temp dir for one test, removed with the object.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace idem::testing {

class TempDir {
 public:
  // `tag` names the directory (idem-<tag>-<pid>-<n>) so leftovers say whose they are.
  explicit TempDir(const std::string& tag = "t") {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("idem-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace idem::testing
