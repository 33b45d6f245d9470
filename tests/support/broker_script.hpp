// Running scripts/broker.sh from a test support: its KEY=VALUE output, and its exit
// status as a Status. Shared by the supports of the brokers it starts (Kafka, Pulsar).
#pragma once

#include <array>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "idem/status.hpp"

namespace idem::testing {

// `broker.sh ARGS` (script is its path); *out gets its stdout. kUnavailable when it
// exits non-zero (its reason is on stderr).
inline Status run_broker_script(const std::string& script, const std::string& args, std::string* out) {
  const std::string cmd = "bash '" + script + "' " + args;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return internal_error("cannot run " + cmd);
  std::array<char, 4096> buf{};
  std::string text;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) text.append(buf.data(), n);
  const int rc = ::pclose(p);
  if (out != nullptr) *out = text;
  if (rc != 0) return unavailable("broker.sh " + args + " failed (its reason is on stderr)");
  return ok_status();
}

// KEY=VALUE lines → map.
inline std::map<std::string, std::string> parse_broker_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace idem::testing
