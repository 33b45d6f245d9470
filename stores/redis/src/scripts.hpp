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

// The record scripts' shared Lua functions (scripts.cpp) followed by body.
std::string with_prelude(const char* body);

// The entity extension (entity_scripts.cpp; keys in entity_layout.hpp).
Script claim_entity_script();
Script commit_entity_script();
Script write_entity_script();
Script buffer_put_script();
Script buffer_read_script();
Script buffer_remove_script();
Script buffer_key_info_script();
Script buffer_account_script();

}  // namespace idem::redis::detail
