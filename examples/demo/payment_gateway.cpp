#include "payment_gateway.hpp"

namespace demo {

idem::Status PaymentGateway::charge(const Order& o) {
  if (auto it = failures_left_.find(o.id); it != failures_left_.end() && it->second > 0) {
    --it->second;
    return idem::unavailable("payment gateway timed out");
  }
  if (o.amount_cents < 0) return idem::invalid_argument("payment gateway rejected amount " + money(o.amount_cents));
  ++charges_[o.id];
  balance_cents_ += o.amount_cents;
  return idem::ok_status();
}

int PaymentGateway::charges_of(std::string_view order_id) const {
  auto it = charges_.find(order_id);
  return it == charges_.end() ? 0 : it->second;
}

}  // namespace demo
