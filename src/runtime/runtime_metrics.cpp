#include <string>

#include "../prometheus.hpp"
#include "idem/runtime.hpp"

namespace idem {

std::string RuntimeMetrics::prometheus(std::string_view prefix) const {
  const std::string p = std::string(prefix) + "_runtime";
  std::string out;
  auto one = [&](const char* name, const char* help, const char* type, std::uint64_t v) {
    out += "# HELP " + p + name + " " + help + "\n# TYPE " + p + name + " " + type + "\n";
    out += p + name + " " + std::to_string(v) + "\n";
  };
  one("_fetched_total", "Deliveries fetched from the source.", "counter", get(kFetched));
  one("_decided_total", "Deliveries whose decision was applied to the broker.", "counter", get(kDecided));
  one("_throttled_total", "Retry and dead-letter actions that waited for the failure-path throttle.", "counter",
      get(kThrottled));
  one("_action_failures_total", "Broker calls (ack, retry, dead_letter) that failed.", "counter", get(kActionFailures));
  one("_fetch_errors_total", "Fetches that failed.", "counter", get(kFetchErrors));
  one("_queue_wait_warnings_total", "Deliveries that waited longer than max_queue_wait.", "counter",
      get(kQueueWaitWarnings));
  one("_in_flight", "Deliveries fetched whose decision is not applied yet.", "gauge", in_flight());
  one("_backlog", "Deliveries fetched and waiting for a worker.", "gauge", backlog());
  out += "# HELP " + p + "_actions_total Broker actions applied, by kind.\n# TYPE " + p + "_actions_total counter\n";
  for (int i = 0; i < 4; ++i) {
    const auto a = static_cast<Action>(i);
    out += p + "_actions_total{action=\"" + std::string(action_name(a)) + "\"} " + std::to_string(actions(a)) + "\n";
  }
  detail::append_histogram(out, p + "_queue_wait_seconds", "Time from receipt to handler start.",
                           queue_wait.snapshot());
  return out;
}

}  // namespace idem
