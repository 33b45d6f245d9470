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

  // One pull request: its number (the last token of its reply subject), the messages
  // it may still bring, whether it may bring any, and when it is given up if no status
  // ends it (a reply lost with the connection).
  struct Pull {
    std::uint64_t number = 0;
    std::size_t left = 0;
    bool open = false;
    TimePoint give_up_at{};
  };
  enum class Read { kNothing, kMessage, kEnded, kStale };

  // Declares what is consumed and subscribes to the pull replies (again after a fetch
  // error other than a timeout, e.g. a deleted durable).
  Status subscribe();
  // Asks the durable for up to `batch` messages, within `expires`.
  Status send_pull(std::size_t batch, Duration expires);
  StatusOr<Read> read_one(Duration wait, std::vector<Delivery>& out);
  // Publishes `what` (+ACK, -NAK, +WPI, +TERM) to m's reply subject.
  natsStatus reply(natsMsg* m, const std::string& what) const;
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
  natsSubscription* sub_ = nullptr;  // the pull replies: inbox_.<request number>
  std::string inbox_;
  std::string next_subject_;  // $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>
  Pull pull_;
  bool redeclare_ = false;  // the server lost the durable or the stream: declare them again
  bool was_connected_ = true;
  std::uint64_t next_handle_ = 1;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;    // handle → delivery
  std::unordered_map<std::uint64_t, std::uint64_t> by_seq_;  // stream sequence → handle
  std::deque<std::pair<TimePoint, std::uint64_t>> touches_;  // (touched, handle), oldest first
};

}  // namespace idem::nats::detail
