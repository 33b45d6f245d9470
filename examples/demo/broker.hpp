// A simulated at-least-once broker: what the consumer sees of Kafka, Pulsar or
// RabbitMQ. Deliveries come out when they are due; a nacked one comes back after its
// delay; one the consumer never acked (because it crashed) comes back again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "idem/decision.hpp"
#include "order.hpp"

namespace demo {

struct Delivery {
  Order order;
  std::string note;           // why the broker delivers it now, for the table
  std::uint32_t attempt = 1;  // the broker's delivery count, from 1
};

// Not thread-safe. Moves the shared clock forward when the next delivery is not due yet.
class Broker {
 public:
  explicit Broker(std::shared_ptr<idem::ManualClock> clock) : clock_(std::move(clock)) {}

  void publish(Order order, std::string note);

  // Returns the next due delivery (advancing the clock to it), or nullopt when empty.
  std::optional<Delivery> next();

  // Applies the consumer's decision: ack and dead_letter settle the delivery (a dead
  // letter is kept in dead_letters()); retry brings it back after decision.delay;
  // hold keeps it unsettled until redeliver_unacked().
  void settle(const Delivery& d, const idem::Decision& decision);

  // The consumer died before its ack reached the broker: deliver `d` again, now.
  void redeliver_unacked(const Delivery& d);

  const std::vector<Order>& dead_letters() const { return dead_letters_; }

 private:
  struct Pending {
    idem::TimePoint due;
    std::uint64_t seq;
    Delivery delivery;
  };
  void enqueue(idem::TimePoint due, Delivery d);

  std::shared_ptr<idem::ManualClock> clock_;
  std::vector<Pending> queue_;  // sorted by (due, seq)
  std::uint64_t seq_ = 0;
  std::vector<Order> dead_letters_;
};

}  // namespace demo
