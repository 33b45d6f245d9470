// Fuzz target: replay traces (docs/design.md §8), split into lines as `idem replay`
// reads them. Each line parses or names its error; a parsed line encodes to JSON that
// parses back to the same fields (the reorder buffer relies on it).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "trace_line.hpp"

namespace {

bool same(const idem::cli::TraceLine& a, const idem::cli::TraceLine& b) {
  return a.id == b.id && a.key == b.key && a.version == b.version && a.event == b.event && a.payload == b.payload &&
         a.stream == b.stream && a.position == b.position && a.at_ms == b.at_ms && a.fail == b.fail &&
         a.reset == b.reset;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const idem::cli::ParsedLine p = idem::cli::parse_trace_line(line);
    if (!p.ok()) continue;
    IDEM_FUZZ_CHECK(!p.line.at_ms || *p.line.at_ms <= idem::cli::kMaxAtMs);
    const idem::cli::ParsedLine again = idem::cli::parse_trace_line(idem::cli::encode_trace_line(p.line));
    IDEM_FUZZ_CHECK(again.ok());
    IDEM_FUZZ_CHECK(same(p.line, again.line));
  }
  return 0;
}
