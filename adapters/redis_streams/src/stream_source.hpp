// The Redis Streams MessageSource (redis_stream_source.hpp). Not thread-safe: the
// runtime calls it from its loop thread only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "connection.hpp"
#include "idem/redis_stream_source.hpp"

namespace idem::redis_streams::detail {

// The dead-letter stream: Options::dead_letter_stream, or "<stream>:dlq" when empty.
std::string dead_letter_stream_of(const Options& o);

class StreamSource final : public MessageSource {
 public:
  explicit StreamSource(Options o);

  // Connects and creates the group if absent.
  Status start();

  Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) override;
  Status ack(const Delivery& d) override;
  Status retry(const Delivery& d, Duration delay) override;
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) override;
  void hold(const Delivery& d) override { in_flight_.erase(d.broker_id); }
  // Claims again what has been in flight for a third of the lease (XCLAIM … JUSTID).
  void keep_alive() override;
  // Sends the acks collected since the last flush as one XACK.
  Status flush() override;
  StatusOr<bool> drained() override;
  std::string describe() const override;
  void close() override;

 private:
  struct Retry {
    std::string id;
    Duration delay;
  };

  Status connect();
  Status create_group();
  // One command on the connection, reconnecting first if it broke.
  StatusOr<ReplyPtr> call(const std::vector<std::string>& argv, Duration block = Duration(0));
  // The same for a command in RESP (Connection::call_encoded).
  StatusOr<ReplyPtr> call_encoded(const std::string& command);
  // Connects (and makes the group) when needed, then send(connection, timeout); once
  // more after making the group again when the server lost it.
  template <class Send>
  StatusOr<ReplyPtr> call_with(Send send, Duration timeout);
  Status read_history(std::size_t max, std::vector<Delivery>& out);
  Status read_new(std::size_t max, Duration timeout, std::vector<Delivery>& out);
  Status claim_due_retries(std::size_t max, std::vector<Delivery>& out);
  Status autoclaim(std::size_t max, std::vector<Delivery>& out);
  // Turns a reply's entries into deliveries (acking deleted ones); returns how many
  // were added. counted: the deliveries' counts are 1 (new entries); else read them.
  std::size_t take_entries(const redictReply* entries, bool counted, std::vector<Delivery>& out);
  // Drops id's scheduled retry, if any.
  void forget_retry(const std::string& id);
  Status fill_delivery_counts(std::vector<Delivery>& out, std::size_t from);
  Status ack_id(const std::string& id);

  Options o_;
  std::shared_ptr<Clock> clock_;
  spdlog::logger* log_;
  std::unique_ptr<Connection> conn_;
  bool was_connected_ = false;
  bool history_done_ = false;
  std::string history_cursor_ = "0";
  std::string autoclaim_cursor_ = "0-0";
  TimePoint next_autoclaim_{};
  std::unordered_map<std::string, TimePoint> in_flight_;  // fetched, not settled: when last claimed
  TimePoint next_touch_{};                                // keep_alive() looks again then
  std::string acks_;                           // acked, not yet sent: their ids in RESP (see ack())
  std::size_t ack_count_ = 0;                  // how many ids acks_ holds
  std::multimap<TimePoint, Retry> retries_;    // due time → entry to take again
};

}  // namespace idem::redis_streams::detail
