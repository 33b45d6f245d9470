// Fuzz target: a broker message's body as `idem consume` decodes it (one replay line,
// docs/design.md §9), then the message view the consumer checks, and the bytes the
// reorder buffer stores for it read back through the extractors' decode().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "idem/message.hpp"
#include "trace_line.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const idem::Extractors<idem::cli::TraceLine> x = idem::cli::trace_extractors();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // A body the buffer stored, read back: any bytes decode or are refused (nullopt).
  const auto stored = x.decode(body);
  const idem::cli::ParsedLine p = idem::cli::parse_trace_line(body);
  IDEM_FUZZ_CHECK(p.ok() == stored.has_value());
  if (!p.ok()) {
    IDEM_FUZZ_CHECK(!p.error.empty());
    return 0;
  }
  const idem::MessageView v = x.view(p.line);
  const std::string bytes = x.encode(p.line);
  const auto back = x.decode(bytes);
  IDEM_FUZZ_CHECK(back.has_value());
  const idem::MessageView w = x.view(*back);
  IDEM_FUZZ_CHECK(v.id == w.id && v.key == w.key && v.version == w.version && v.event == w.event &&
                  v.payload == w.payload && v.stream == w.stream && v.position == w.position);
  return 0;
}
