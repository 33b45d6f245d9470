// The message type of the demo: an order, as the shop's consumer receives it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/message.hpp"

namespace demo {

struct Order {
  std::string id;  // the message id: the producer's order number
  std::string customer;
  std::int64_t amount_cents = 0;  // negative amounts are a producer bug (a poison message)
  std::string payload;            // the serialized order, as it came off the wire
};

// Returns an order whose payload serializes its fields.
inline Order make_order(std::string id, std::string customer, std::int64_t amount_cents) {
  Order o{std::move(id), std::move(customer), amount_cents, {}};
  o.payload = o.id + ";" + o.customer + ";" + std::to_string(o.amount_cents);
  return o;
}

// How idem reads an Order: the id for dedup, the payload to detect a reused id.
inline idem::Extractors<Order> order_extractors() {
  idem::Extractors<Order> x;
  x.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  x.payload = [](const Order& o) { return std::optional<std::string_view>(o.payload); };
  return x;
}

// "$25.00", "-$1.00".
inline std::string money(std::int64_t cents) {
  const std::int64_t a = cents < 0 ? -cents : cents;
  const std::string c = std::to_string(a % 100);
  return (cents < 0 ? "-$" : "$") + std::to_string(a / 100) + "." + (c.size() == 1 ? "0" + c : c);
}

}  // namespace demo
