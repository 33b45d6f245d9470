// A remote payment service: the side effect the shop must make exactly once. It keeps
// its own account of every charge, which the demo audits at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "idem/status.hpp"
#include "order.hpp"

namespace demo {

// Not thread-safe.
class PaymentGateway {
 public:
  // The next `times` charges for `order_id` fail with a timeout (a flaky network).
  void fail_next(const std::string& order_id, int times) { failures_left_[order_id] = times; }

  // Charges the order. Returns OK and records the charge, or the gateway's error
  // (a timeout while failures are pending; a rejection for a negative amount).
  idem::Status charge(const Order& o);

  // The number of times `order_id` was charged.
  int charges_of(std::string_view order_id) const;
  std::int64_t balance_cents() const { return balance_cents_; }
  std::size_t orders_charged() const { return charges_.size(); }

 private:
  std::map<std::string, int, std::less<>> charges_;
  std::map<std::string, int, std::less<>> failures_left_;
  std::int64_t balance_cents_ = 0;
};

}  // namespace demo
