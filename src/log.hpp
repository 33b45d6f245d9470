// Internal logging helpers: every call is a no-op when the logger is null.
#pragma once

#include <spdlog/logger.h>

#include <string_view>
#include <utility>

namespace idem::detail {

template <class... Args>
void log_warn(spdlog::logger* log, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (log != nullptr) log->warn(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void log_error(spdlog::logger* log, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (log != nullptr) log->error(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void log_info(spdlog::logger* log, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (log != nullptr) log->info(fmt, std::forward<Args>(args)...);
}

// Renders bytes for a log line: printable ASCII as is, the rest as \xNN; at most
// `max` bytes, then "...".
std::string printable(std::string_view bytes, std::size_t max = 128);

}  // namespace idem::detail
