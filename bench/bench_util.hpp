// Small helpers every benchmark's report uses: CPU time, numbers with thousands
// separators, and facts read from /proc.
#pragma once

#include <time.h>

#include <fstream>
#include <string>

namespace idem::bench {

// This process's CPU time in seconds.
inline double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// v rounded, with ',' every three digits: 1234567.8 → "1,234,568".
inline std::string with_commas(double v) {
  const std::string digits = std::to_string(static_cast<long long>(v + 0.5));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// The first line of `file` that starts with `key`, after its "key: " (the whole first
// line when key is empty); "?" if there is none.
inline std::string first_line_of(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (key.empty() || line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return key.empty() || colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "?";
}

}  // namespace idem::bench
