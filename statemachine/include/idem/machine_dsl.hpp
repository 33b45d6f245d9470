// The C++ declaration of a state machine: one row per transition, in the spirit of
// Boost.SML's tables, validated by build() exactly as a file is (machine_spec.hpp).
//
//   using namespace idem::dsl;
//   idem::BuildResult product = idem::Machine("product")
//       .initial("offline")
//       .final_states({"deleted"})
//       .max_retries(5)
//       .backoff({idem::Duration(1000), 2.0, idem::Duration(60'000)})
//       .rows({
//           state("offline") + event("online") = state("online"),
//           state("online") + event("offline") = state("offline"),
//           row({"online", "offline"}, "delete", "deleted"),
//       })
//       .build();
//
// Each row records the C++ source line it was written on; errors point there.
//
// Compile-time checks: a table of string literals (StaticRow) can be validated by a
// static_assert on static_table_error():
//
//   constexpr idem::StaticRow kRows[] = {{"offline", "online", "online"}, …};
//   constexpr std::string_view kFinals[] = {"deleted"};
//   static_assert(idem::static_table_error(kRows, "offline", kFinals).empty());
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <span>
#include <string>
#include <string_view>

#include "idem/machine_spec.hpp"

namespace idem {

// Returns the position of a C++ source location (file, line, column).
SourcePos source_pos(const std::source_location& loc);

namespace dsl {

struct StateRef {
  std::string_view name;
  SourcePos pos;
};
struct EventRef {
  std::string_view name;
  SourcePos pos;
};

// `state("a") + event("e")`: a row waiting for its target.
class RowStart {
 public:
  RowStart(StateRef from, EventRef event) : from_(from), event_(event) {}
  // `… = state("b")`: the complete row.
  TransitionRow operator=(const StateRef& to) const;

 private:
  StateRef from_;
  EventRef event_;
};

inline StateRef state(std::string_view name, std::source_location loc = std::source_location::current()) {
  return {name, source_pos(loc)};
}
inline EventRef event(std::string_view name, std::source_location loc = std::source_location::current()) {
  return {name, source_pos(loc)};
}
inline RowStart operator+(StateRef from, EventRef event) { return {from, event}; }

// row("offline", "online", "online"): from one state.
TransitionRow row(std::string_view from, std::string_view event, std::string_view to,
                  std::source_location loc = std::source_location::current());
// row({"online", "offline"}, "delete", "deleted"): from each of several states.
TransitionRow row(std::initializer_list<std::string_view> from, std::string_view event, std::string_view to,
                  std::source_location loc = std::source_location::current());

}  // namespace dsl

using dsl::row;

// A row of string literals, for tables checked at compile time.
struct StaticRow {
  std::string_view from;
  std::string_view event;
  std::string_view to;
};

// Returns "" if the rows pass the checks that need no file: no empty names, no (from,
// event) pair with two targets, no row out of a final state, the initial state and every
// final state named in some row, at least one row. Else returns what is wrong.
// constexpr: usable in static_assert. Quadratic in the number of rows.
constexpr std::string_view static_table_error(std::span<const StaticRow> rows, std::string_view initial,
                                              std::span<const std::string_view> finals = {}) {
  if (rows.empty()) return "the table has no rows";
  auto named = [&](std::string_view s) {
    for (const auto& r : rows)
      if (r.from == s || r.to == s) return true;
    return false;
  };
  if (initial.empty()) return "the initial state is empty";
  if (!named(initial)) return "the initial state is not named in any row";
  for (auto f : finals) {
    if (f.empty()) return "a final state is empty";
    if (!named(f)) return "a final state is not named in any row";
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (r.from.empty() || r.event.empty() || r.to.empty()) return "a row has an empty name";
    for (auto f : finals)
      if (r.from == f) return "a row leaves a final state";
    for (std::size_t j = 0; j < i; ++j)
      if (rows[j].from == r.from && rows[j].event == r.event && rows[j].to != r.to)
        return "a (from, event) pair has two different targets";
  }
  return "";
}

// The builder of a MachineSpec. Every setter returns *this.
class Machine {
 public:
  explicit Machine(std::string_view name, std::source_location loc = std::source_location::current());

  Machine& initial(std::string_view state, std::source_location loc = std::source_location::current());
  Machine& final_states(std::initializer_list<std::string_view> states,
                        std::source_location loc = std::source_location::current());
  Machine& final_states(std::span<const std::string_view> states,
                        std::source_location loc = std::source_location::current());
  Machine& max_retries(std::uint32_t n);
  Machine& backoff(const Backoff& b, std::source_location loc = std::source_location::current());
  Machine& max_event_name_bytes(std::size_t n);
  Machine& renamed(std::string_view old_name, std::string_view new_name,
                   std::source_location loc = std::source_location::current());
  Machine& rows(std::initializer_list<TransitionRow> rows);
  Machine& rows(std::span<const StaticRow> rows, std::source_location loc = std::source_location::current());
  Machine& add(TransitionRow row);

  const MachineSpec& spec() const { return spec_; }
  // Validates the declaration: build_table(spec()).
  BuildResult build() const;

 private:
  MachineSpec spec_;
};

}  // namespace idem
