#include "idem/metrics.hpp"

#include <algorithm>
#include <cstdio>

#include "log.hpp"
#include "prometheus.hpp"

namespace idem {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// kLatencyBucketsSeconds in whole nanoseconds (every bound is a whole number of them).
constexpr auto kBucketBoundsNs = [] {
  std::array<std::int64_t, kLatencyBucketsSeconds.size()> ns{};
  for (std::size_t i = 0; i < ns.size(); ++i) ns[i] = static_cast<std::int64_t>(kLatencyBucketsSeconds[i] * 1e9 + 0.5);
  return ns;
}();

// The first bucket whose bound is >= d. A linear scan: most records fall in the first
// few buckets, so it beats a binary search.
std::size_t bucket_of(std::chrono::nanoseconds d) {
  std::size_t i = 0;
  while (i < kBucketBoundsNs.size() && d.count() > kBucketBoundsNs[i]) ++i;
  return i;
}

}  // namespace

namespace detail {

void append_histogram(std::string& out, const std::string& name, std::string_view help, const HistogramSnapshot& h) {
  char buf[160];
  out += "# HELP " + name + " " + std::string(help) + "\n# TYPE " + name + " histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
    cumulative += h.buckets[i];
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), kLatencyBucketsSeconds[i],
                  static_cast<unsigned long long>(cumulative));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name.c_str(),
                static_cast<unsigned long long>(h.count), name.c_str(), h.sum_seconds, name.c_str(),
                static_cast<unsigned long long>(h.count));
  out += buf;
}

}  // namespace detail

void Histogram::record(std::chrono::nanoseconds d) {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  buckets_[bucket_of(d)].fetch_add(1, kRelaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(d.count()), kRelaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    s.buckets[i] = buckets_[i].load(kRelaxed);
    s.count += s.buckets[i];
  }
  s.sum_seconds = static_cast<double>(sum_ns_.load(kRelaxed)) / 1e9;
  return s;
}

void Metrics::count(const Decision& d) {
  decisions_[static_cast<int>(d.reason) * kActions + static_cast<int>(d.action)].fetch_add(1, kRelaxed);
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  for (int r = 0; r < kReasonCount; ++r) {
    for (int a = 0; a < kActions; ++a) {
      const std::uint64_t n = decisions_[r * kActions + a].load(kRelaxed);
      s.decisions[r] += n;
      s.actions[a] += n;
    }
  }
  s.ack_timeout_warnings = ack_timeouts_.load(kRelaxed);
  s.store_latency = store_latency.snapshot();
  s.handler_latency = handler_latency.snapshot();
  s.queue_wait = queue_wait.snapshot();
  s.drained = drained_.load(kRelaxed);
  s.skipped_versions = skipped_.load(kRelaxed);
  for (int i = 0; i < kReasonCount; ++i) s.buffered_outcomes[i] = buffered_outcomes_[i].load(kRelaxed);
  std::lock_guard lock(buffer_mu_);
  s.buffered = buffered_;
  s.buffer_bytes = buffer_bytes_;
  s.gaps = gaps_;
  return s;
}

void Metrics::set_buffer(std::uint64_t count, std::uint64_t bytes, std::vector<GapAge> gaps) {
  std::lock_guard lock(buffer_mu_);
  buffered_ = count;
  buffer_bytes_ = bytes;
  gaps_ = std::move(gaps);
}

std::string Metrics::prometheus(std::string_view prefix) const {
  const MetricsSnapshot s = snapshot();
  const std::string p(prefix);
  std::string out;
  out += "# HELP " + p + "_decisions_total Decisions by action and reason.\n";
  out += "# TYPE " + p + "_decisions_total counter\n";
  // Only reasons seen so far; an action label per reason would need a 2-D table, so
  // actions are exported on their own counter below.
  for (int i = 0; i < kReasonCount; ++i) {
    if (s.decisions[i] == 0) continue;
    out += p + "_decisions_total{reason=\"" + std::string(reason_name(static_cast<Reason>(i))) + "\"} " +
           std::to_string(s.decisions[i]) + "\n";
  }
  out += "# HELP " + p + "_actions_total Decisions by action.\n# TYPE " + p + "_actions_total counter\n";
  for (int i = 0; i < 4; ++i) {
    out += p + "_actions_total{action=\"" + std::string(action_name(static_cast<Action>(i))) + "\"} " +
           std::to_string(s.actions[i]) + "\n";
  }
  out += "# HELP " + p + "_ack_timeout_warnings_total Deliveries that outlived the broker ack timeout.\n";
  out += "# TYPE " + p + "_ack_timeout_warnings_total counter\n";
  out += p + "_ack_timeout_warnings_total " + std::to_string(s.ack_timeout_warnings) + "\n";
  auto gauge = [&](const std::string& name, const std::string& help, const std::string& type, std::uint64_t v) {
    out += "# HELP " + p + name + " " + help + "\n# TYPE " + p + name + " " + type + "\n";
    out += p + name + " " + std::to_string(v) + "\n";
  };
  gauge("_buffered_messages", "Entries in the reorder buffer (as of the last tick).", "gauge", s.buffered);
  gauge("_buffer_bytes", "Bytes in the reorder buffer (as of the last tick).", "gauge", s.buffer_bytes);
  gauge("_drained_total", "Buffered messages processed by a drain.", "counter", s.drained);
  gauge("_skipped_versions_total", "Versions skipped by the gap policy skip.", "counter", s.skipped_versions);
  if (!s.gaps.empty()) {
    out += "# HELP " + p + "_gap_age_seconds Age of the oldest gaps in the reorder buffer, by key.\n";
    out += "# TYPE " + p + "_gap_age_seconds gauge\n";
    for (const GapAge& g : s.gaps) {
      std::string key = detail::printable(g.key, 64);
      std::string escaped;
      for (char c : key) {
        if (c == '"' || c == '\\') escaped += '\\';
        escaped += c;
      }
      out += p + "_gap_age_seconds{key=\"" + escaped + "\"} " + std::to_string(g.age.count() / 1000.0) + "\n";
    }
  }
  detail::append_histogram(out, p + "_store_seconds", "Latency of each store call.", s.store_latency);
  detail::append_histogram(out, p + "_handler_seconds", "Latency of each handler call.", s.handler_latency);
  detail::append_histogram(out, p + "_queue_wait_seconds", "Time from receipt to handler start.", s.queue_wait);
  return out;
}

}  // namespace idem
