#include "idem/machine_dsl.hpp"

#include <utility>

namespace idem {

SourcePos source_pos(const std::source_location& loc) {
  return {loc.file_name(), static_cast<int>(loc.line()), static_cast<int>(loc.column())};
}

namespace dsl {

TransitionRow RowStart::operator=(const StateRef& to) const {
  TransitionRow r;
  r.from.push_back({std::string(from_.name), from_.pos});
  r.event = {std::string(event_.name), event_.pos};
  r.to = {std::string(to.name), to.pos};
  r.pos = from_.pos;
  return r;
}

TransitionRow row(std::string_view from, std::string_view event, std::string_view to, std::source_location loc) {
  return row({from}, event, to, loc);
}

TransitionRow row(std::initializer_list<std::string_view> from, std::string_view event, std::string_view to,
                  std::source_location loc) {
  const SourcePos pos = source_pos(loc);
  TransitionRow r;
  for (auto f : from) r.from.push_back({std::string(f), pos});
  r.event = {std::string(event), pos};
  r.to = {std::string(to), pos};
  r.pos = pos;
  return r;
}

}  // namespace dsl

Machine::Machine(std::string_view name, std::source_location loc) {
  spec_.pos = source_pos(loc);
  spec_.name = {std::string(name), spec_.pos};
}

Machine& Machine::initial(std::string_view state, std::source_location loc) {
  spec_.initial = {std::string(state), source_pos(loc)};
  return *this;
}

Machine& Machine::final_states(std::initializer_list<std::string_view> states, std::source_location loc) {
  return final_states(std::span<const std::string_view>(states.begin(), states.size()), loc);
}

Machine& Machine::final_states(std::span<const std::string_view> states, std::source_location loc) {
  for (auto s : states) spec_.finals.push_back({std::string(s), source_pos(loc)});
  return *this;
}

Machine& Machine::max_retries(std::uint32_t n) {
  spec_.max_retries = n;
  return *this;
}

Machine& Machine::backoff(const Backoff& b, std::source_location loc) {
  spec_.backoff = b;
  spec_.backoff_pos = source_pos(loc);
  return *this;
}

Machine& Machine::max_event_name_bytes(std::size_t n) {
  spec_.max_event_name_bytes = n;
  return *this;
}

Machine& Machine::renamed(std::string_view old_name, std::string_view new_name, std::source_location loc) {
  const SourcePos pos = source_pos(loc);
  spec_.renamed.push_back({{std::string(old_name), pos}, {std::string(new_name), pos}});
  return *this;
}

Machine& Machine::rows(std::initializer_list<TransitionRow> rows) {
  for (const auto& r : rows) spec_.rows.push_back(r);
  return *this;
}

Machine& Machine::rows(std::span<const StaticRow> rows, std::source_location loc) {
  for (const auto& r : rows) spec_.rows.push_back(dsl::row(r.from, r.event, r.to, loc));
  return *this;
}

Machine& Machine::add(TransitionRow row) {
  spec_.rows.push_back(std::move(row));
  return *this;
}

BuildResult Machine::build() const { return build_table(spec_); }

}  // namespace idem
