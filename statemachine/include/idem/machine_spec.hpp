// MachineSpec: the declaration of a business state machine as written (in C++ with
// machine_dsl.hpp, or in a file with machine_yaml.hpp), before validation. Names are
// strings here; build_table() validates a spec and interns it into a TransitionTable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "idem/options.hpp"
#include "idem/transition_table.hpp"

namespace idem {

// Where a piece of a declaration was written. Lines and columns count from 1; 0 means
// unknown (e.g. a row built without a location).
struct SourcePos {
  std::string file;  // the file (YAML) or the C++ source file (DSL); may be empty
  int line = 0;
  int column = 0;

  // "file:line:col", "file:line", "file" or "" (the parts that are known).
  std::string to_string() const;
};

// A name with the place it was written.
struct NamedAt {
  std::string name;
  SourcePos pos;
};

// One row of the table: from any of `from`, on `event`, go to `to`.
struct TransitionRow {
  std::vector<NamedAt> from;  // REQUIRES: not empty
  NamedAt event;
  NamedAt to;
  SourcePos pos;  // the row itself
};

// A state renamed in a new version of the table: entities stored in `old_name` continue
// in `new_name` (docs/statemachines.md, "Changing a table").
struct RenamedState {
  NamedAt old_name;  // REQUIRES: not a state of the table
  NamedAt new_name;  // REQUIRES: a state of the table
};

// Default limit on the length of an event name, in bytes.
inline constexpr std::size_t kDefaultMaxEventNameBytes = 256;

// A declaration, as written.
struct MachineSpec {
  NamedAt name;                   // REQUIRES: not empty
  NamedAt initial;                // REQUIRES: a state named in some row
  std::vector<NamedAt> finals;    // each a state named in some row; no rows leave them
  std::uint32_t max_retries = 5;  // `retry` decisions per message id before dead_letter; default 5
  Backoff backoff;                // delay of the k-th retry; default 1 s ×2 up to 60 s
  SourcePos backoff_pos;          // where the backoff was written, if it was
  std::size_t max_event_name_bytes = kDefaultMaxEventNameBytes;  // bytes; default 256; >= 1
  std::vector<TransitionRow> rows;
  std::vector<RenamedState> renamed;
  SourcePos pos;  // the declaration itself (for what is missing from it)
};

enum class Severity { kError, kWarning };

// One finding of validation. Errors make a declaration unusable; warnings do not.
struct Diagnostic {
  Severity severity = Severity::kError;
  SourcePos pos;
  std::string message;

  // "FILE:LINE:COL: error: message" (the known parts of the position, then the severity).
  std::string to_string() const;
};

// The outcome of validating a declaration: a table iff there is no error.
struct BuildResult {
  std::optional<TransitionTable> table;
  std::vector<Diagnostic> diagnostics;  // ordered by position (file, line, column)

  bool ok() const { return table.has_value(); }
  std::size_t error_count() const;
  std::size_t warning_count() const;
  // The diagnostics of one severity, one to_string() per line.
  std::string format(Severity severity) const;
};

// Limits on the size of a table, so that its arrays stay small.
inline constexpr std::size_t kMaxStates = 4096;
inline constexpr std::size_t kMaxEvents = 4096;
inline constexpr std::size_t kMaxTableCells = std::size_t{1} << 22;  // states × events

// Validates `spec` and, when it has no error, builds its table. Never throws on a bad
// declaration (only std::bad_alloc).
//
// Errors: empty names; an event or state name longer than max_event_name_bytes; a
// missing or unknown initial state; an unknown final state; one (from, event) pair with
// two different targets; a row leaving a final state; max_event_name_bytes of 0;
// backoff multiplier < 1 or max < initial or initial < 0; a renamed entry whose old name
// is a state or whose new name is not; more than kMaxStates states, kMaxEvents events
// or kMaxTableCells cells; no rows.
// Warnings: a row identical to an earlier one (the same from, event and to); a final
// state listed twice; a state unreachable from the initial state.
//
// State ids: the initial state is 0, the others in order of first mention in the rows;
// event ids in order of first mention.
BuildResult build_table(const MachineSpec& spec);

}  // namespace idem
