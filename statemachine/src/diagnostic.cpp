#include <algorithm>

#include "idem/machine_spec.hpp"

namespace idem {

std::string SourcePos::to_string() const {
  std::string out = file;
  if (line > 0) {
    if (!out.empty()) out += ':';
    out += std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  return out;
}

std::string Diagnostic::to_string() const {
  std::string out = pos.to_string();
  if (!out.empty()) out += ": ";
  out += severity == Severity::kError ? "error: " : "warning: ";
  out += message;
  return out;
}

std::size_t BuildResult::error_count() const {
  return static_cast<std::size_t>(std::count_if(diagnostics.begin(), diagnostics.end(),
                                                [](const Diagnostic& d) { return d.severity == Severity::kError; }));
}

std::size_t BuildResult::warning_count() const { return diagnostics.size() - error_count(); }

std::string BuildResult::format(Severity severity) const {
  std::string out;
  for (const auto& d : diagnostics)
    if (d.severity == severity) out += d.to_string() + '\n';
  return out;
}

}  // namespace idem
