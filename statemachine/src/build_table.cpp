// build_table(): validation of a declaration and construction of its TransitionTable,
// including the reachability answers (docs/design.md §6), precomputed per (state, event).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "idem/machine_spec.hpp"
#include "names.hpp"

namespace idem {

using detail::quote_name;

class TableBuilder {
 public:
  explicit TableBuilder(const MachineSpec& spec) : spec_(spec) {}

  BuildResult run() {
    BuildResult result;
    check_scalars();
    intern();
    if (!too_big_) check_rows();
    if (!too_big_) check_renamed();
    if (errors_ == 0) {
      fill_arrays();
      warn_unreachable();
    }
    std::stable_sort(diags_.begin(), diags_.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::tie(a.pos.file, a.pos.line, a.pos.column) < std::tie(b.pos.file, b.pos.line, b.pos.column);
    });
    result.diagnostics = std::move(diags_);
    if (errors_ == 0) result.table = std::move(t_);
    return result;
  }

 private:
  void error(const SourcePos& pos, std::string message) {
    diags_.push_back({Severity::kError, pos, std::move(message)});
    ++errors_;
  }
  void warning(const SourcePos& pos, std::string message) {
    diags_.push_back({Severity::kWarning, pos, std::move(message)});
  }
  const SourcePos& pos_or_spec(const SourcePos& p) const { return p.line > 0 ? p : spec_.pos; }

  // Checks a name: not empty, not over the limit. Returns true iff usable.
  bool check_name(const NamedAt& n, const char* what) {
    if (n.name.empty()) {
      error(pos_or_spec(n.pos), std::string("empty ") + what + " name");
      return false;
    }
    if (spec_.max_event_name_bytes > 0 && n.name.size() > spec_.max_event_name_bytes) {
      error(pos_or_spec(n.pos), std::string(what) + " name of " + std::to_string(n.name.size()) +
                                    " bytes exceeds the limit of " + std::to_string(spec_.max_event_name_bytes) +
                                    " bytes (max_event_name_bytes)");
      return false;
    }
    return true;
  }

  void check_scalars() {
    if (spec_.name.name.empty()) error(pos_or_spec(spec_.name.pos), "missing or empty machine name (name)");
    if (spec_.max_event_name_bytes == 0) error(spec_.pos, "max_event_name_bytes must be at least 1");
    const Backoff& b = spec_.backoff;
    const SourcePos& bp = pos_or_spec(spec_.backoff_pos);
    if (b.initial.count() < 0) error(bp, "backoff initial_ms must not be negative");
    if (!(b.multiplier >= 1.0)) error(bp, "backoff multiplier must be at least 1");
    if (b.max < b.initial) error(bp, "backoff max_ms must be at least initial_ms");
    if (spec_.rows.empty()) error(spec_.pos, "the table has no transitions (transitions)");
  }

  // Assigns ids: the initial state 0, then states and events in order of first mention.
  void intern() {
    auto add_state = [&](const NamedAt& n) {
      if (n.name.empty() || state_ids_.count(n.name)) return;
      state_ids_.emplace(n.name, static_cast<StateId>(t_.states_.size()));
      t_.states_.push_back(n.name);
      state_pos_.push_back(n.pos);
    };
    // Names first, so that an unknown initial state is known as such.
    std::unordered_map<std::string, bool> named;
    for (const auto& r : spec_.rows) {
      if (r.from.empty()) error(pos_or_spec(r.pos), "a transition needs at least one `from` state");
      for (const auto& f : r.from)
        if (check_name(f, "state")) named[f.name] = true;
      check_name(r.event, "event");
      if (check_name(r.to, "state")) named[r.to.name] = true;
    }
    if (spec_.initial.name.empty()) {
      error(pos_or_spec(spec_.initial.pos), "missing or empty initial state (initial)");
    } else if (!named.count(spec_.initial.name)) {
      error(pos_or_spec(spec_.initial.pos),
            "unknown initial state " + quote_name(spec_.initial.name) + ": no transition names it");
    } else {
      add_state(spec_.initial);
    }
    for (const auto& r : spec_.rows) {
      for (const auto& f : r.from) add_state(f);
      add_state(r.to);
      if (!r.event.name.empty() && !event_ids_.count(r.event.name)) {
        event_ids_.emplace(r.event.name, static_cast<EventId>(t_.events_.size()));
        t_.events_.push_back(r.event.name);
      }
      if (t_.states_.size() > kMaxStates || t_.events_.size() > kMaxEvents) break;
    }
    too_big_ = t_.states_.size() > kMaxStates || t_.events_.size() > kMaxEvents ||
               t_.states_.size() * t_.events_.size() > kMaxTableCells;
    if (t_.states_.size() > kMaxStates) error(spec_.pos, "more than " + std::to_string(kMaxStates) + " states");
    if (t_.events_.size() > kMaxEvents) error(spec_.pos, "more than " + std::to_string(kMaxEvents) + " events");
    if (t_.states_.size() * t_.events_.size() > kMaxTableCells)
      error(spec_.pos, "states × events exceeds " + std::to_string(kMaxTableCells) + " cells");
    t_.final_.assign(t_.states_.size(), 0);
    std::unordered_map<std::string, const SourcePos*> seen_final;
    for (const auto& f : spec_.finals) {
      if (!check_name(f, "final state")) continue;
      const auto it = state_ids_.find(f.name);
      if (it == state_ids_.end()) {
        error(pos_or_spec(f.pos), "unknown final state " + quote_name(f.name) + ": no transition names it");
        continue;
      }
      if (seen_final.count(f.name)) {
        warning(pos_or_spec(f.pos), "final state " + quote_name(f.name) + " listed twice");
        continue;
      }
      seen_final.emplace(f.name, &f.pos);
      t_.final_[it->second] = 1;
    }
  }

  // Conflicting targets, duplicate rows, rows out of final states.
  void check_rows() {
    struct First {
      StateId to;
      const SourcePos* pos;
    };
    std::map<std::pair<StateId, EventId>, First> first;
    for (const auto& r : spec_.rows) {
      // A row with an empty name was reported by intern(); the rest is still checked.
      const auto ei = event_ids_.find(r.event.name);
      const auto ti = state_ids_.find(r.to.name);
      if (ei == event_ids_.end() || ti == state_ids_.end()) continue;
      const EventId e = ei->second;
      const StateId to = ti->second;
      for (const auto& f : r.from) {
        const auto fi = state_ids_.find(f.name);
        if (fi == state_ids_.end()) continue;
        const StateId from = fi->second;
        if (t_.final_[from]) {
          error(pos_or_spec(f.pos),
                "transition out of final state " + quote_name(f.name) + " on " + quote_name(r.event.name));
          continue;
        }
        const auto [it, inserted] = first.try_emplace({from, e}, First{to, &f.pos});
        if (inserted) {
          t_.transitions_.push_back({from, e, to});
          continue;
        }
        const SourcePos& p = *it->second.pos;
        const std::string earlier =
            p.line > 0 ? " (first at line " + std::to_string(p.line) + ", column " + std::to_string(p.column) + ")"
                       : "";
        if (it->second.to == to) {
          warning(pos_or_spec(f.pos), "duplicate transition " + quote_name(f.name) + " on " + quote_name(r.event.name) +
                                          " to " + quote_name(r.to.name) + earlier);
        } else {
          error(pos_or_spec(f.pos), "state " + quote_name(f.name) + " on " + quote_name(r.event.name) +
                                        " has two targets: " + quote_name(t_.states_[it->second.to]) + earlier +
                                        " and " + quote_name(r.to.name));
        }
      }
    }
    std::sort(t_.transitions_.begin(), t_.transitions_.end(), [](const Transition& a, const Transition& b) {
      return std::pair(a.from, a.event) < std::pair(b.from, b.event);
    });
  }

  void check_renamed() {
    for (const auto& rn : spec_.renamed) {
      if (!check_name(rn.old_name, "renamed state") || !check_name(rn.new_name, "state")) continue;
      if (state_ids_.count(rn.old_name.name)) {
        error(pos_or_spec(rn.old_name.pos),
              "renamed state " + quote_name(rn.old_name.name) + " is still a state of the table");
        continue;
      }
      const auto it = state_ids_.find(rn.new_name.name);
      if (it == state_ids_.end()) {
        error(pos_or_spec(rn.new_name.pos), "renamed to unknown state " + quote_name(rn.new_name.name));
        continue;
      }
      if (!renamed_ids_.emplace(rn.old_name.name, it->second).second) {
        error(pos_or_spec(rn.old_name.pos), "state " + quote_name(rn.old_name.name) + " renamed twice");
        continue;
      }
      t_.renamed_.emplace_back(rn.old_name.name, rn.new_name.name);
    }
  }

  // next_, verdict_, the name maps and the declared scalars.
  void fill_arrays() {
    const std::size_t ns = t_.states_.size();
    const std::size_t ne = t_.events_.size();
    t_.name_ = spec_.name.name;
    t_.initial_ = 0;
    t_.max_retries_ = spec_.max_retries;
    t_.backoff_ = spec_.backoff;
    t_.max_event_name_bytes_ = spec_.max_event_name_bytes;
    for (const auto& [n, id] : state_ids_) t_.state_ids_.emplace(n, id);
    for (const auto& [n, id] : renamed_ids_) t_.state_ids_.emplace(n, id);
    for (const auto& [n, id] : event_ids_) t_.event_ids_.emplace(n, id);
    t_.next_.assign(ns * ne, kNoState);
    for (const auto& tr : t_.transitions_) t_.next_[tr.from * ne + tr.event] = tr.to;

    // accepts[s]: events with a transition out of s, as a bitset of `words` words.
    const std::size_t words = (ne + 63) / 64;
    std::vector<std::uint64_t> accepts(ns * words, 0);
    std::vector<std::vector<StateId>> succ(ns);
    for (const auto& tr : t_.transitions_) {
      accepts[tr.from * words + tr.event / 64] |= std::uint64_t{1} << (tr.event % 64);
      succ[tr.from].push_back(tr.to);
    }
    for (auto& s : succ) {
      std::sort(s.begin(), s.end());
      s.erase(std::unique(s.begin(), s.end()), s.end());
    }
    // Tarjan's strongly connected components; each is emitted after every component
    // reachable from it, so reach[] of the successors is known when a component closes.
    // reach[c]: events accepted by some state reachable in >= 1 step from c's states.
    std::vector<int> index(ns, -1), low(ns, 0), comp(ns, -1);
    std::vector<char> on_stack(ns, 0);
    std::vector<StateId> stack;
    std::vector<std::vector<std::uint64_t>> reach;
    int next_index = 0;
    std::function<void(StateId)> visit = [&](StateId v) {
      index[v] = low[v] = next_index++;
      stack.push_back(v);
      on_stack[v] = 1;
      for (StateId w : succ[v]) {
        if (index[w] < 0) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
      }
      if (low[v] != index[v]) return;
      const int c = static_cast<int>(reach.size());
      std::vector<StateId> members;
      StateId w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = 0;
        comp[w] = c;
        members.push_back(w);
      } while (w != v);
      std::vector<std::uint64_t> r(words, 0);
      for (StateId m : members) {
        for (StateId x : succ[m]) {
          if (comp[x] == c) {  // an edge inside: every member reaches every member
            for (StateId y : members)
              for (std::size_t k = 0; k < words; ++k) r[k] |= accepts[y * words + k];
          } else {
            for (std::size_t k = 0; k < words; ++k) r[k] |= reach[comp[x]][k] | comp_accepts_[comp[x]][k];
          }
        }
      }
      std::vector<std::uint64_t> a(words, 0);
      for (StateId y : members)
        for (std::size_t k = 0; k < words; ++k) a[k] |= accepts[y * words + k];
      reach.push_back(std::move(r));
      comp_accepts_.push_back(std::move(a));
    };
    for (std::size_t s = 0; s < ns; ++s)
      if (index[s] < 0) visit(static_cast<StateId>(s));

    t_.verdict_.assign(ns * ne, Verdict::kNeverValid);
    for (std::size_t s = 0; s < ns; ++s) {
      const auto& r = reach[comp[s]];
      for (std::size_t e = 0; e < ne; ++e) {
        Verdict& v = t_.verdict_[s * ne + e];
        if (t_.next_[s * ne + e] != kNoState) {
          v = Verdict::kApply;
        } else if ((r[e / 64] >> (e % 64)) & 1) {
          v = Verdict::kNotYetValid;
        }
      }
    }
  }

  void warn_unreachable() {
    const std::size_t ns = t_.states_.size();
    std::vector<char> seen(ns, 0);
    std::vector<StateId> todo{t_.initial_};
    seen[t_.initial_] = 1;
    while (!todo.empty()) {
      const StateId s = todo.back();
      todo.pop_back();
      for (std::size_t e = 0; e < t_.events_.size(); ++e) {
        const StateId to = t_.next_[s * t_.events_.size() + e];
        if (to != kNoState && !seen[to]) {
          seen[to] = 1;
          todo.push_back(to);
        }
      }
    }
    for (std::size_t s = 0; s < ns; ++s)
      if (!seen[s])
        warning(pos_or_spec(state_pos_[s]), "state " + quote_name(t_.states_[s]) +
                                                " is unreachable from initial state " +
                                                quote_name(t_.states_[t_.initial_]));
  }

  const MachineSpec& spec_;
  TransitionTable t_;
  std::unordered_map<std::string, StateId> state_ids_;
  std::unordered_map<std::string, EventId> event_ids_;
  std::unordered_map<std::string, StateId> renamed_ids_;
  std::vector<SourcePos> state_pos_;
  std::vector<std::vector<std::uint64_t>> comp_accepts_;
  std::vector<Diagnostic> diags_;
  std::size_t errors_ = 0;
  bool too_big_ = false;  // over kMaxStates, kMaxEvents or kMaxTableCells
};

BuildResult build_table(const MachineSpec& spec) { return TableBuilder(spec).run(); }

}  // namespace idem
