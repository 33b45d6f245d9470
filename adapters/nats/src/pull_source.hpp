// The NATS JetStream MessageSource (nats_source.hpp). Not thread-safe: the runtime
// calls it from its loop thread only.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "connection.hpp"
#include "idem/nats_source.hpp"

namespace idem::nats::detail {

class PullSource final : public MessageSource {
 public:
  explicit PullSource(Options o);
  ~PullSource() override;

  // Connects, declares the streams and the durable, and subscribes.
  Status start();

  Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) override;
  Status ack(const Delivery& d) override;
  Status retry(const Delivery& d, Duration delay) override;
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) override;
  void hold(const Delivery& d) override;
  void keep_alive() override;
  StatusOr<bool> drained() override;
  std::string describe() const override;
  void close() override;

 private:
  struct InFlight {
    natsMsg* msg;       // owned; its reply subject is where Ack, Nak, InProgress and Term go
    std::uint64_t seq;  // the stream sequence
    TimePoint touched;  // received, or the last InProgress
  };

  // Declares what is consumed and binds the pull subscription, once per connection
  // (again after a fetch error other than a timeout, e.g. a deleted durable).
  Status subscribe();
  // kUnavailable while nats.c reconnects; logs the loss and the return once each.
  Status check_connected();
  // Adds m to what is in flight and to `out`, or, when its stream sequence is already
  // in flight here (AckWait passed while it waited), keeps the newer delivery in its
  // place without handing it out again. Takes m.
  void take(natsMsg* m, TimePoint now, std::vector<Delivery>& out);
  // Removes d from what is in flight and returns its message (null if unknown).
  natsMsg* release(const Delivery& d);
  Status settled(natsStatus s, natsMsg* m, const char* what);

  Options o_;
  std::shared_ptr<Clock> clock_;
  spdlog::logger* log_;
  Duration keep_alive_every_;
  std::unique_ptr<Connection> conn_;
  natsSubscription* sub_ = nullptr;
  bool was_connected_ = true;
  std::uint64_t next_handle_ = 1;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;    // handle → delivery
  std::unordered_map<std::uint64_t, std::uint64_t> by_seq_;  // stream sequence → handle
  std::deque<std::pair<TimePoint, std::uint64_t>> touches_;  // (touched, handle), oldest first
};

}  // namespace idem::nats::detail
