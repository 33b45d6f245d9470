// What the demo prints: a table of deliveries, the consumer's metrics, and the audit
// that every effect happened exactly once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "broker.hpp"
#include "idem/decision.hpp"
#include "idem/metrics.hpp"

namespace demo {

// One row per delivery: time since the chapter began, why the broker delivered it,
// the id, and the consumer's decision. Writes to stdout.
class DeliveryTable {
 public:
  explicit DeliveryTable(idem::TimePoint start) : start_(start) {}
  void header() const;
  void row(idem::TimePoint now, const Delivery& d, const idem::Decision& decision) const;
  // A line of story between rows, e.g. "the consumer crashes".
  void event(std::string_view text) const;

 private:
  idem::TimePoint start_;
};

// Prints the decision counters of a metrics snapshot (only the non-zero ones).
void print_metrics(const idem::MetricsSnapshot& m);

// An audit: named checks, printed with ✓ or ✗.
class Audit {
 public:
  void check(bool ok, std::string what);
  // Prints every check; returns true iff all passed.
  bool print(std::string_view title) const;

 private:
  std::vector<std::pair<bool, std::string>> checks_;
};

void print_chapter(std::string_view title, std::string_view text);

}  // namespace demo
