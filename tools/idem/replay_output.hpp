// Writes the replay output of docs/design.md §8: one compact JSON object per line, keys in
// the documented order, fields that do not apply omitted.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "idem/decision.hpp"

namespace idem::cli {

// What the built-in handler did, reported once its effect is committed.
struct Effect {
  std::optional<std::string> id;
  std::optional<std::string> key;
  std::optional<std::uint64_t> version;
  std::optional<std::string> event;
  std::optional<std::string> from;  // state before the transition
  std::optional<std::string> to;    // state after the transition
};

// Not thread-safe. Does not own `out`.
class ReplayWriter {
 public:
  explicit ReplayWriter(std::ostream& out) : out_(out) {}

  // {"type":"effect","id":…,"key":…,"version":…,"event":…,"from":…,"to":…}
  void effect(const Effect& e);

  // {"type":"decision","line":N,"id":…,"action":…,"reason":…,"delay_ms":…,"error":…}
  // delay_ms only for retry; error (the decision's detail) only for bad_message.
  void decision(std::uint64_t line, const std::optional<std::string>& id, const Decision& d);

  // The decision for a line that could not be parsed: dead_letter / bad_message.
  void bad_line(std::uint64_t line, const std::optional<std::string>& id, std::string_view error);

 private:
  std::ostream& out_;
};

}  // namespace idem::cli
