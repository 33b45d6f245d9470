#include "report.hpp"

#include <chrono>
#include <cstdio>
#include <string>

namespace demo {

void print_chapter(std::string_view title, std::string_view text) {
  std::printf("\n== %.*s ==\n%.*s\n\n", static_cast<int>(title.size()), title.data(), static_cast<int>(text.size()),
              text.data());
}

void DeliveryTable::header() const {
  std::printf("  %6s  %-44s %-9s %-8s %-12s %-18s %s\n", "t", "delivery", "amount", "id", "action", "reason", "delay");
  std::printf("  %6s  %-44s %-9s %-8s %-12s %-18s %s\n", "------", std::string(44, '-').c_str(), "--------", "--------",
              "-----------", "-----------------", "------");
}

void DeliveryTable::row(idem::TimePoint now, const Delivery& d, const idem::Decision& decision) const {
  const double t = std::chrono::duration<double>(now - start_).count();
  std::string delay;
  if (decision.action == idem::Action::kRetry) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(decision.delay.count()) / 1000);
    delay = buf;
  }
  char line[256];
  std::snprintf(line, sizeof line, "  %5.1fs  %-44s %-9s %-8s %-12s %-18s %s", t, d.note.c_str(),
                money(d.order.amount_cents).c_str(), d.order.id.c_str(),
                std::string(idem::action_name(decision.action)).c_str(),
                std::string(idem::reason_name(decision.reason)).c_str(), delay.c_str());
  std::string text = line;
  text.erase(text.find_last_not_of(' ') + 1);
  std::printf("%s\n", text.c_str());
}

void DeliveryTable::event(std::string_view text) const {
  std::printf("  %6s  ~~ %.*s\n", "", static_cast<int>(text.size()), text.data());
}

void print_metrics(const idem::MetricsSnapshot& m) {
  std::printf("  consumer metrics (idem::Metrics::snapshot()):\n    actions:");
  for (int a = 0; a < 4; ++a) {
    const auto action = static_cast<idem::Action>(a);
    if (m.actions_for(action) > 0)
      std::printf(" %s=%llu", std::string(idem::action_name(action)).c_str(),
                  static_cast<unsigned long long>(m.actions_for(action)));
  }
  std::printf("\n    reasons:");
  for (int r = 0; r < idem::kReasonCount; ++r) {
    const auto reason = static_cast<idem::Reason>(r);
    if (m.decisions_for(reason) > 0)
      std::printf(" %s=%llu", std::string(idem::reason_name(reason)).c_str(),
                  static_cast<unsigned long long>(m.decisions_for(reason)));
  }
  std::printf("\n    handler calls: %llu, store calls: %llu\n",
              static_cast<unsigned long long>(m.handler_latency.count),
              static_cast<unsigned long long>(m.store_latency.count));
}

void Audit::check(bool ok, std::string what) { checks_.emplace_back(ok, std::move(what)); }

bool Audit::print(std::string_view title) const {
  bool all = true;
  std::printf("\n  %.*s\n", static_cast<int>(title.size()), title.data());
  for (const auto& [ok, what] : checks_) {
    std::printf("    %s %s\n", ok ? "\u2713" : "\u2717 FAILED:", what.c_str());
    all = all && ok;
  }
  return all;
}

}  // namespace demo
