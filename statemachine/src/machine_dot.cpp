#include "idem/machine_dot.hpp"

#include <string>
#include <string_view>

namespace idem {
namespace {

// A DOT double-quoted string: " and \ escaped, newlines as \n.
std::string dot_id(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string to_dot(const TransitionTable& t) {
  // The invisible start node: a name no state has.
  std::string start = "__initial";
  while (t.state_id(start)) start += '_';
  const std::string start_id = dot_id(start);
  std::string out = "digraph " + dot_id(t.name()) + " {\n";
  out += "  rankdir=LR;\n";
  out += "  node [shape=circle];\n";
  out += "  " + start_id + " [shape=point, label=\"\"];\n";
  for (std::size_t s = 0; s < t.state_count(); ++s) {
    const auto id = static_cast<StateId>(s);
    out += "  " + dot_id(t.state_name(id));
    if (t.is_final(id)) out += " [shape=doublecircle]";
    out += ";\n";
  }
  out += "  " + start_id + " -> " + dot_id(t.state_name(t.initial())) + ";\n";
  for (const auto& tr : t.transitions())
    out += "  " + dot_id(t.state_name(tr.from)) + " -> " + dot_id(t.state_name(tr.to)) +
           " [label=" + dot_id(t.event_name(tr.event)) + "];\n";
  out += "}\n";
  return out;
}

}  // namespace idem
