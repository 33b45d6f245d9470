// A WebSocket producer to one topic, shared by the publisher and by the source (for
// dead letters and delayed retries). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "idem/pulsar_source.hpp"
#include "web.hpp"

namespace idem::pulsar::detail {

using Properties = std::vector<std::pair<std::string, std::string>>;

struct Outgoing {
  std::string payload;  // the bytes, unencoded
  std::string key;      // empty: none
  Properties properties;
  std::int64_t deliver_after_ms = 0;  // 0: now
};

Endpoint endpoint_of(const Options& o);
// "persistent/TENANT/NAMESPACE/TOPIC", as the WebSocket and admin paths name it.
std::string topic_path(const Options& o, const std::string& topic);

class Producer {
 public:
  Producer(const Options& o, std::string topic) : o_(o), topic_(std::move(topic)) {}

  // Sends every message, in order, and returns once the broker has acknowledged each;
  // connects first (again, after a failure). On an error some may have been stored.
  Status send(std::span<const Outgoing> messages);

 private:
  Status connect();
  Status await_receipts(std::size_t count);

  const Options& o_;
  std::string topic_;
  std::unique_ptr<WebSocket> ws_;
  std::uint64_t next_context_ = 1;
};

}  // namespace idem::pulsar::detail
