// Stable names of actions, reasons and guarantees.
#include <array>
#include <string>

#include "idem/decision.hpp"
#include "idem/guarantee.hpp"
#include "idem/ordering.hpp"
#include "log.hpp"

namespace idem {
namespace {

constexpr std::array<std::string_view, kReasonCount> kReasonNames = {
    "processed",         "duplicate",      "in_progress",     "stale",
    "buffered",          "invalid_transition", "retries_exhausted", "handler_failed",
    "retry_requested",   "payload_conflict",   "bad_message",       "store_unavailable",
    "lease_lost",        "unacknowledged",     "nacked",            "fail_open",
    "reset",             "concurrent_update",  "buffer_full",       "too_far_ahead",
    "gap_timeout",       "handler_rejected"};

constexpr std::array<std::string_view, 4> kActionNames = {"ack", "retry", "dead_letter", "hold"};

constexpr std::array<std::string_view, 4> kOrderingNames = {"none", "watermark", "monotonic", "strict"};
constexpr std::array<std::string_view, 3> kGapPolicyNames = {"hold", "skip", "dead_letter"};

template <class E, std::size_t N>
std::optional<E> from_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 4> kGuaranteeNames = {"at_most_once", "at_least_once",
                                                             "effectively_once", "manual"};

}  // namespace

std::string_view action_name(Action a) { return kActionNames[static_cast<int>(a)]; }
std::string_view reason_name(Reason r) { return kReasonNames[static_cast<int>(r)]; }

std::optional<Reason> reason_from_name(std::string_view name) {
  for (int i = 0; i < kReasonCount; ++i)
    if (kReasonNames[i] == name) return static_cast<Reason>(i);
  return std::nullopt;
}

std::string_view ordering_name(Ordering o) { return kOrderingNames[static_cast<int>(o)]; }
std::optional<Ordering> ordering_from_name(std::string_view name) { return from_name<Ordering>(kOrderingNames, name); }
std::string_view gap_policy_name(GapPolicy p) { return kGapPolicyNames[static_cast<int>(p)]; }
std::optional<GapPolicy> gap_policy_from_name(std::string_view name) {
  return from_name<GapPolicy>(kGapPolicyNames, name);
}

std::string_view guarantee_name(Guarantee g) { return kGuaranteeNames[static_cast<int>(g)]; }

std::optional<Guarantee> guarantee_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kGuaranteeNames.size(); ++i)
    if (kGuaranteeNames[i] == name) return static_cast<Guarantee>(i);
  return std::nullopt;
}

namespace detail {

std::string printable(std::string_view bytes, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(bytes.size(), max) + 8);
  for (std::size_t i = 0; i < bytes.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (bytes.size() > max) out += "...";
  return out;
}

}  // namespace detail
}  // namespace idem
