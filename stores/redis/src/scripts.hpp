// The Lua scripts behind every state change, and their SHA1s once loaded.
#pragma once

#include <string>

namespace idem::redis::detail {

struct Script {
  const char* name;   // for errors
  std::string body;   // Lua source
  std::string sha;    // set by the store after SCRIPT LOAD; empty: always EVAL
};

// Each returns a fresh copy (sha empty). Keys and arguments: see scripts.cpp.
Script claim_script();
Script commit_script();
Script release_script();
Script extend_script();
Script inspect_script();
Script claim_many_script();
Script commit_many_script();

}  // namespace idem::redis::detail
