#include "broker.hpp"

#include <algorithm>
#include <cstdio>

namespace demo {

void Broker::enqueue(idem::TimePoint due, Delivery d) {
  Pending p{due, seq_++, std::move(d)};
  auto at = std::upper_bound(queue_.begin(), queue_.end(), p, [](const Pending& a, const Pending& b) {
    return a.due != b.due ? a.due < b.due : a.seq < b.seq;
  });
  queue_.insert(at, std::move(p));
}

void Broker::publish(Order order, std::string note) { enqueue(clock_->now(), {std::move(order), std::move(note), 1}); }

std::optional<Delivery> Broker::next() {
  if (queue_.empty()) return std::nullopt;
  Pending p = std::move(queue_.front());
  queue_.erase(queue_.begin());
  if (p.due > clock_->now()) clock_->set(p.due);
  return std::move(p.delivery);
}

void Broker::settle(const Delivery& d, const idem::Decision& decision) {
  switch (decision.action) {
    case idem::Action::kAck:
      return;
    case idem::Action::kDeadLetter:
      dead_letters_.push_back(d.order);
      return;
    case idem::Action::kHold:
      return;
    case idem::Action::kRetry: {
      char note[64];
      std::snprintf(note, sizeof note, "redelivered after %.1f s", static_cast<double>(decision.delay.count()) / 1000);
      enqueue(clock_->now() + decision.delay, {d.order, note, d.attempt + 1});
      return;
    }
  }
}

void Broker::redeliver_unacked(const Delivery& d) {
  enqueue(clock_->now(), {d.order, "redelivered: its ack was lost in the crash", d.attempt + 1});
}

}  // namespace demo
