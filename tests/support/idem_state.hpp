// A folder private to this test process for what `idem consume` keeps between runs
// when no flag says where (its STATE_DIRECTORY: the default store, the consumer-name
// locks): the idem processes one test process starts share it, other test processes
// and the user's own do not.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace idem::testing {

// The folder, made on first use and removed at exit. Call it before fork().
inline const std::string& idem_state_directory() {
  struct Folder {
    std::string path;
    Folder() {
      std::string pattern = (std::filesystem::temp_directory_path() / "idem-state-XXXXXX").string();
      path = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::filesystem::temp_directory_path().string();
    }
    ~Folder() {
      std::error_code ec;
      if (path != std::filesystem::temp_directory_path().string()) std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

}  // namespace idem::testing
