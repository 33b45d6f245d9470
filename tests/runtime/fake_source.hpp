// Test support: an in-memory MessageSource that records every broker call, with
// redelivery of retried messages and counters for the runtime's bounds.
#pragma once

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "idem/source.hpp"

namespace idem::runtime_test {

class FakeSource : public MessageSource {
 public:
  // Queues a message with body `body` in `partition`.
  void push(std::string body, std::string partition = "p0") {
    std::lock_guard lock(mu_);
    Delivery d;
    d.body = std::move(body);
    d.partition = std::move(partition);
    d.broker_id = std::to_string(next_id_++);
    d.delivery_count = 1;
    queue_.push_back(std::move(d));
  }

  Status fetch(std::size_t max, Duration, std::vector<Delivery>& out) override {
    if (revoke_after_ > 0 && fetches_++ == revoke_after_ && listener_ != nullptr) {
      const std::vector<std::string> parts{revoke_partition_};
      listener_->on_revoked(parts);  // settles through ack() etc.: called without mu_
      std::lock_guard lock(mu_);
      revoked_with_in_flight_ = outstanding_in(revoke_partition_);
    }
    std::lock_guard lock(mu_);
    largest_request_ = std::max(largest_request_, max);
    for (std::size_t n = 0; n < max && !queue_.empty(); ++n) {
      out.push_back(queue_.front());
      queue_.pop_front();
      outstanding_.push_back(out.back());
    }
    most_outstanding_ = std::max(most_outstanding_, outstanding_.size());
    return ok_status();
  }
  Status ack(const Delivery& d) override { return settle("ack", d); }
  Status retry(const Delivery& d, Duration) override {
    Status s = settle("retry", d);
    std::lock_guard lock(mu_);
    Delivery again = d;
    ++again.delivery_count;
    queue_.push_back(std::move(again));
    return s;
  }
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view) override {
    {
      std::lock_guard lock(mu_);
      dead_reasons_.emplace_back(reason);
    }
    return settle("dead_letter", d);
  }
  void hold(const Delivery& d) override { (void)settle("hold", d); }
  void keep_alive() override {
    keep_alives_.fetch_add(1);
    if (outstanding() == 0) keep_alives_idle_.fetch_add(1);
  }
  StatusOr<bool> drained() override {
    std::lock_guard lock(mu_);
    return queue_.empty() && outstanding_.empty();
  }
  void set_assignment_listener(AssignmentListener* l) override { listener_ = l; }
  std::string describe() const override { return "fake"; }
  void close() override {}

  // On the n-th fetch (from 0), revoke `partition` before handing out messages.
  void revoke_on_fetch(std::size_t n, std::string partition) {
    revoke_after_ = n;
    revoke_partition_ = std::move(partition);
  }

  // Every broker call so far: (action, body).
  std::vector<std::pair<std::string, std::string>> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::size_t count(const std::string& action) const {
    std::lock_guard lock(mu_);
    return static_cast<std::size_t>(
        std::count_if(calls_.begin(), calls_.end(), [&](const auto& c) { return c.first == action; }));
  }
  std::vector<std::string> dead_reasons() const {
    std::lock_guard lock(mu_);
    return dead_reasons_;
  }
  std::size_t most_outstanding() const { return most_outstanding_; }
  std::size_t largest_request() const { return largest_request_; }
  std::size_t revoked_with_in_flight() const { return revoked_with_in_flight_; }
  std::size_t keep_alives() const { return keep_alives_.load(); }
  // keep_alive() calls made while nothing fetched was undecided.
  std::size_t keep_alives_idle() const { return keep_alives_idle_.load(); }
  std::size_t outstanding() const {
    std::lock_guard lock(mu_);
    return outstanding_.size();
  }

 private:
  Status settle(const char* action, const Delivery& d) {
    std::lock_guard lock(mu_);
    calls_.emplace_back(action, d.body);
    auto it = std::find_if(outstanding_.begin(), outstanding_.end(),
                           [&](const Delivery& o) { return o.broker_id == d.broker_id; });
    if (it == outstanding_.end()) {
      ++settled_twice_;
      return internal_error("settled twice: " + d.broker_id);
    }
    outstanding_.erase(it);
    return ok_status();
  }
  std::size_t outstanding_in(const std::string& partition) const {
    return static_cast<std::size_t>(std::count_if(outstanding_.begin(), outstanding_.end(),
                                                  [&](const Delivery& o) { return o.partition == partition; }));
  }

  mutable std::mutex mu_;
  std::deque<Delivery> queue_;
  std::vector<Delivery> outstanding_;
  std::vector<std::pair<std::string, std::string>> calls_;
  std::vector<std::string> dead_reasons_;
  std::uint64_t next_id_ = 1;
  std::size_t most_outstanding_ = 0;
  std::size_t largest_request_ = 0;
  std::size_t settled_twice_ = 0;
  std::size_t fetches_ = 0;
  std::size_t revoke_after_ = 0;
  std::string revoke_partition_;
  std::size_t revoked_with_in_flight_ = 0;
  AssignmentListener* listener_ = nullptr;
  std::atomic<std::size_t> keep_alives_{0};
  std::atomic<std::size_t> keep_alives_idle_{0};

 public:
  std::size_t settled_twice() const { return settled_twice_; }
};

}  // namespace idem::runtime_test
