// One command for an executor: a script call (EVALSHA, or EVAL after NOSCRIPT) or a
// plain command, with the key that routes it in a cluster.
#pragma once

#include <string>
#include <vector>

namespace idem::redis::detail {

struct Script;

struct Command {
  const Script* script = nullptr;  // non-null: call this script with keys and args
  std::vector<std::string> keys;   // script keys; keys[0] routes the command
  std::vector<std::string> args;   // script: its ARGV; else the whole command

  // The routing key, or empty for a command that may go to any node.
  const std::string* routing_key() const { return keys.empty() ? nullptr : &keys.front(); }
};

}  // namespace idem::redis::detail
