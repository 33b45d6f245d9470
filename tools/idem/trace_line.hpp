// One line of a replay trace (docs/design.md §8): a JSON object describing one delivery.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/message.hpp"

namespace idem::cli {

// The largest at_ms accepted: 2100-01-01T00:00:00Z. Keeps every time the consumer
// computes from it (at_ms + lease, at_ms + ttl) inside idem::TimePoint's range.
inline constexpr std::uint64_t kMaxAtMs = 4'102'444'800'000;

// One outgoing message a line asks the handler of `idem consume` to publish through
// the outbox: {"to": URI, "payload": …}. A JSON string payload is sent as its text;
// any other JSON value as its compact JSON form.
struct PublishRequest {
  std::string to;
  std::string payload;

  bool operator==(const PublishRequest&) const = default;
};

// The fields of one delivery. Absent fields are nullopt. Strings are UTF-8 as decoded
// from JSON, so "\u0000" in the trace is a NUL byte here.
struct TraceLine {
  std::optional<std::string> id;
  std::optional<std::string> key;
  std::optional<std::uint64_t> version;
  std::optional<std::string> event;
  std::optional<std::string> payload;
  std::optional<std::string> stream;
  std::optional<std::uint64_t> position;
  std::optional<std::uint64_t> at_ms;   // the logical clock; REQUIRES: <= kMaxAtMs
  bool fail = false;                    // the built-in handler fails for this message
  bool reset = false;                   // a watermark reset, not a delivery
  std::vector<PublishRequest> publish;  // "publish": [{"to": URI, "payload": …}, …]
};

// The result of parsing one line: `error` is empty iff the line is well-formed.
// For a malformed line, `line.id` still holds the id when it could be read, so the
// decision can name it.
struct ParsedLine {
  TraceLine line;
  std::string error;

  bool ok() const { return error.empty(); }
};

// Parses one line of a trace (without its line terminator; a trailing '\r' is
// ignored). Never throws. Fields not named in docs/design.md §8 are ignored, so traces may
// carry their own annotations.
ParsedLine parse_trace_line(std::string_view text);

// Returns `line` as one line of JSON that parse_trace_line() reads back to the same
// fields (the reorder buffer stores messages in this form).
std::string encode_trace_line(const TraceLine& line);

// The extractors of a TraceLine: every field, and encode/decode through the JSON form.
Extractors<TraceLine> trace_extractors();

}  // namespace idem::cli
