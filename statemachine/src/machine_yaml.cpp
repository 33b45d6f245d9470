// The YAML form of a machine: limits first (yaml_limits.cpp), then the tree, key by key.
#include "idem/machine_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "names.hpp"
#include "yaml_limits.hpp"

namespace idem {
namespace {

using detail::quote_name;

class SpecReader {
 public:
  SpecReader(const std::string& file, std::vector<Diagnostic>& diags) : file_(file), diags_(diags) {}

  std::optional<MachineSpec> read(const YAML::Node& root) {
    MachineSpec spec;
    spec.pos = pos(root);
    if (!root.IsMap()) {
      error(root, "expected a mapping with the machine (name, initial, transitions, …), got " + kind(root));
      ++structural_errors_;
      return std::nullopt;
    }
    std::map<std::string, SourcePos> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      const YAML::Node key = it->first;  // copies: it-> yields a temporary
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        error(key, "expected a key name, got " + kind(key));
        continue;
      }
      const std::string& k = key.Scalar();
      const std::size_t errors_before = errors_;
      if (!seen.emplace(k, pos(key)).second) {
        error(key, "duplicate key " + quote_name(k) + " (first at " + seen[k].to_string() + ")");
        continue;
      }
      if (k == "name") {
        name(value, "machine", spec.name);
      } else if (k == "initial") {
        name(value, "state", spec.initial);
      } else if (k == "final") {
        finals(value, spec.finals);
      } else if (k == "max_retries") {
        if (auto n = integer(value, "max_retries", 0, std::numeric_limits<std::uint32_t>::max()))
          spec.max_retries = static_cast<std::uint32_t>(*n);
      } else if (k == "max_event_name_bytes") {
        if (auto n = integer(value, "max_event_name_bytes", 1, std::numeric_limits<std::int32_t>::max()))
          spec.max_event_name_bytes = static_cast<std::size_t>(*n);
      } else if (k == "backoff") {
        backoff(value, spec);
      } else if (k == "transitions") {
        transitions(value, spec.rows);
      } else if (k == "renamed") {
        renamed(value, spec.renamed);
      } else {
        error(key, "unknown key " + quote_name(k) +
                       " (expected name, initial, final, max_retries, backoff, transitions, renamed, "
                       "max_event_name_bytes)");
      }
      if (errors_ > errors_before && kStructural.count(k)) ++structural_errors_;
    }
    return spec;
  }

  std::size_t errors() const { return errors_; }
  // Errors in the parts that define the graph (name, initial, final, transitions,
  // renamed): after one, build_table() would report consequences, not causes.
  std::size_t structural_errors() const { return structural_errors_; }

 private:
  SourcePos pos(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }
  void error(const YAML::Node& at, std::string message) {
    diags_.push_back({Severity::kError, pos(at), std::move(message)});
    ++errors_;
  }
  static std::string kind(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Null:
        return "nothing (null)";
      case YAML::NodeType::Scalar:
        return "a scalar";
      case YAML::NodeType::Sequence:
        return "a sequence";
      case YAML::NodeType::Map:
        return "a mapping";
      case YAML::NodeType::Undefined:
        break;
    }
    return "nothing";
  }

  // A name: a scalar. An empty one is kept (build_table() reports it with its position).
  bool name(const YAML::Node& n, const char* what, NamedAt& out) {
    if (n.IsNull()) {
      error(n, std::string("empty ") + what + " name");
      return false;
    }
    if (!n.IsScalar()) {
      error(n, std::string(*what == 'e' ? "expected an " : "expected a ") + what + " name, got " + kind(n));
      return false;
    }
    out = {n.Scalar(), pos(n)};
    return true;
  }

  // One name or a sequence of names.
  void names(const YAML::Node& n, const char* what, std::vector<NamedAt>& out, bool allow_empty) {
    if (n.IsSequence()) {
      if (n.size() == 0 && !allow_empty) error(n, std::string("expected at least one ") + what + " name");
      for (const auto& item : n) {
        NamedAt one;
        if (name(item, what, one)) out.push_back(std::move(one));
      }
      return;
    }
    NamedAt one;
    if (name(n, what, one)) out.push_back(std::move(one));
  }

  void finals(const YAML::Node& n, std::vector<NamedAt>& out) {
    if (n.IsNull()) return;  // `final:` with nothing: no final states
    names(n, "final state", out, true);
  }

  std::optional<std::int64_t> integer(const YAML::Node& n, const char* what, std::int64_t min, std::int64_t max) {
    std::int64_t v = 0;
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size() && v >= min && v <= max) return v;
    }
    error(n, std::string(what) + ": expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                 (n.IsScalar() ? ", got " + quote_name(n.Scalar()) : ", got " + kind(n)));
    return std::nullopt;
  }

  std::optional<double> number(const YAML::Node& n, const char* what) {
    double v = 0;
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size()) return v;
    }
    error(n, std::string(what) + ": expected a number" +
                 (n.IsScalar() ? ", got " + quote_name(n.Scalar()) : ", got " + kind(n)));
    return std::nullopt;
  }

  void backoff(const YAML::Node& n, MachineSpec& spec) {
    spec.backoff_pos = pos(n);
    if (!n.IsMap()) {
      error(n, "backoff: expected a mapping {initial_ms, multiplier, max_ms}, got " + kind(n));
      return;
    }
    std::set<std::string> seen;
    constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max() / 1000;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
      if (!seen.insert(k).second) {
        error(it->first, "duplicate key " + quote_name(k));
      } else if (k == "initial_ms") {
        if (auto v = integer(it->second, "backoff initial_ms", 0, kMaxMs)) spec.backoff.initial = Duration(*v);
      } else if (k == "max_ms") {
        if (auto v = integer(it->second, "backoff max_ms", 0, kMaxMs)) spec.backoff.max = Duration(*v);
      } else if (k == "multiplier") {
        if (auto v = number(it->second, "backoff multiplier")) spec.backoff.multiplier = *v;
      } else {
        error(it->first, "unknown key " + quote_name(k) + " in backoff (expected initial_ms, multiplier, max_ms)");
      }
    }
  }

  void transitions(const YAML::Node& n, std::vector<TransitionRow>& rows) {
    if (!n.IsSequence()) {
      error(n, "transitions: expected a sequence of {from, on, to}, got " + kind(n));
      return;
    }
    for (const auto& item : n) {
      if (!item.IsMap()) {
        error(item, "a transition: expected a mapping {from, on, to}, got " + kind(item));
        continue;
      }
      TransitionRow row;
      row.pos = pos(item);
      std::set<std::string> seen;
      for (auto it = item.begin(); it != item.end(); ++it) {
        const std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
        if (!seen.insert(k).second) {
          error(it->first, "duplicate key " + quote_name(k) + " in a transition");
        } else if (k == "from") {
          names(it->second, "state", row.from, false);
        } else if (k == "on") {
          name(it->second, "event", row.event);
        } else if (k == "to") {
          name(it->second, "state", row.to);
        } else {
          error(it->first, "unknown key " + quote_name(k) + " in a transition (expected from, on, to)");
        }
      }
      for (const char* required : {"from", "on", "to"})
        if (!seen.count(required)) error(item, std::string("a transition without \"") + required + "\"");
      rows.push_back(std::move(row));
    }
  }

  void renamed(const YAML::Node& n, std::vector<RenamedState>& out) {
    if (n.IsNull()) return;
    if (!n.IsMap()) {
      error(n, "renamed: expected a mapping {old state: new state}, got " + kind(n));
      return;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      RenamedState r;
      if (name(it->first, "renamed state", r.old_name) && name(it->second, "state", r.new_name))
        out.push_back(std::move(r));
    }
  }

  inline static const std::set<std::string> kStructural = {"name", "initial", "final", "transitions", "renamed"};

  const std::string& file_;
  std::vector<Diagnostic>& diags_;
  std::size_t errors_ = 0;
  std::size_t structural_errors_ = 0;
};

Diagnostic file_error(const std::string& file, int line, int column, std::string message) {
  return {Severity::kError, {file, line, column}, std::move(message)};
}

// The declaration read from `text`, even when some parts had errors (they are in
// `diagnostics`); nullopt when nothing usable was read. `semantic_ok` is set to whether
// build_table() may run on it: no error touched the graph.
std::optional<MachineSpec> read_spec(std::string_view text, const std::string& file, const YamlLimits& limits,
                                     std::vector<Diagnostic>& diagnostics, bool& semantic_ok) {
  semantic_ok = false;
  if (auto p = detail::check_yaml_limits(text, limits)) {
    diagnostics.push_back(file_error(file, p->line, p->column, p->message));
    return std::nullopt;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const YAML::Mark& m = e.mark;
    diagnostics.push_back(
        file_error(file, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1, "invalid YAML: " + e.msg));
    return std::nullopt;
  }
  try {
    SpecReader reader(file, diagnostics);
    auto spec = reader.read(root);
    semantic_ok = spec.has_value() && reader.structural_errors() == 0;
    return spec;
  } catch (const YAML::Exception& e) {  // not expected: every access is type-checked first
    diagnostics.push_back(file_error(file, 0, 0, std::string("invalid machine: ") + e.what()));
    return std::nullopt;
  }
}

}  // namespace

std::optional<MachineSpec> parse_machine_yaml(std::string_view text, const std::string& file, const YamlLimits& limits,
                                              std::vector<Diagnostic>& diagnostics) {
  const std::size_t before = diagnostics.size();
  bool semantic_ok = false;
  auto spec = read_spec(text, file, limits, diagnostics, semantic_ok);
  if (diagnostics.size() > before) return std::nullopt;
  return spec;
}

BuildResult load_machine_yaml(std::string_view text, const std::string& file, const YamlLimits& limits) {
  BuildResult result;
  bool semantic_ok = false;
  auto spec = read_spec(text, file, limits, result.diagnostics, semantic_ok);
  if (!spec || !semantic_ok) return result;
  const bool read_errors = !result.diagnostics.empty();
  BuildResult built = build_table(*spec);
  if (!read_errors) return built;
  // Some non-graph part was wrong (an unknown key, a bad backoff value): report both.
  result.diagnostics.insert(result.diagnostics.end(), built.diagnostics.begin(), built.diagnostics.end());
  std::stable_sort(result.diagnostics.begin(), result.diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
  });
  return result;
}

BuildResult load_machine_file(const std::string& path, const YamlLimits& limits) {
  BuildResult result;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    result.diagnostics.push_back(file_error(path, 0, 0, "cannot read the machine file: it is a directory"));
    return result;
  }
  std::ifstream in(path, std::ios::in | std::ios::binary);
  if (!in) {
    result.diagnostics.push_back(
        file_error(path, 0, 0, std::string("cannot read the machine file: ") + std::strerror(errno)));
    return result;
  }
  // Reads at most one byte over the limit, so that a huge file is refused unread.
  std::string text(limits.max_file_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    result.diagnostics.push_back(file_error(path, 0, 0, "cannot read the machine file: read error"));
    return result;
  }
  if (text.size() > limits.max_file_bytes) {
    result.diagnostics.push_back(file_error(
        path, 0, 0, "file exceeds the limit of " + std::to_string(limits.max_file_bytes) + " bytes (max_file_bytes)"));
    return result;
  }
  return load_machine_yaml(text, path, limits);
}

}  // namespace idem
