// The fields idem reads from a user's message, and the extractors that read them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.hpp"

namespace idem {

// The fields of one delivery, as extracted. Views point into the user's message and
// are valid while it is.
struct MessageView {
  std::optional<std::string_view> id;       // bytes; required by dedup guarantees
  std::optional<std::string_view> key;      // entity key (ordering, state machines)
  std::optional<std::uint64_t> version;     // entity version (ordering)
  std::optional<std::string_view> event;    // state-machine event name
  std::optional<std::string_view> payload;  // fingerprinted for conflict detection
  std::optional<std::uint32_t> delivery_count;  // broker's count, from 1, if known
  std::optional<TimePoint> received_at;     // when the client received it, if known
  std::optional<std::string_view> stream;   // watermark: the ordered stream (partition)
  std::optional<std::uint64_t> position;    // watermark: the position in the stream
};

// Small functions that read MessageView's fields from a Msg. Leave a field empty when
// the message type has no such field; returning nullopt means "absent in this one".
template <class Msg>
struct Extractors {
  std::function<std::optional<std::string_view>(const Msg&)> id;
  std::function<std::optional<std::string_view>(const Msg&)> key;
  std::function<std::optional<std::uint64_t>(const Msg&)> version;
  std::function<std::optional<std::string_view>(const Msg&)> event;
  std::function<std::optional<std::string_view>(const Msg&)> payload;
  std::function<std::optional<std::uint32_t>(const Msg&)> delivery_count;
  std::function<std::optional<TimePoint>(const Msg&)> received_at;
  std::function<std::optional<std::string_view>(const Msg&)> stream;
  std::function<std::optional<std::uint64_t>(const Msg&)> position;
  // strict ordering: a message waiting in the reorder buffer is stored as encode(m) and
  // handed to the handler later as decode(bytes) (nullopt: undecodable, dead-lettered
  // as bad_message). REQUIRES: decode(encode(m)) has the same extracted fields as m.
  std::function<std::string(const Msg&)> encode;
  std::function<std::optional<Msg>(std::string_view)> decode;

  // Returns the view of m through the extractors that are set.
  MessageView view(const Msg& m) const {
    MessageView v;
    if (id) v.id = id(m);
    if (key) v.key = key(m);
    if (version) v.version = version(m);
    if (event) v.event = event(m);
    if (payload) v.payload = payload(m);
    if (delivery_count) v.delivery_count = delivery_count(m);
    if (received_at) v.received_at = received_at(m);
    if (stream) v.stream = stream(m);
    if (position) v.position = position(m);
    return v;
  }
};

// Which extractors a consumer has; checked against the options when it is built.
struct ExtractorSet {
  bool id = false, key = false, version = false, event = false, payload = false;
  bool delivery_count = false, received_at = false;
  bool stream = false, position = false, codec = false;  // codec: encode and decode

  template <class Msg>
  static ExtractorSet of(const Extractors<Msg>& e) {
    return {static_cast<bool>(e.id),      static_cast<bool>(e.key),
            static_cast<bool>(e.version), static_cast<bool>(e.event),
            static_cast<bool>(e.payload), static_cast<bool>(e.delivery_count),
            static_cast<bool>(e.received_at), static_cast<bool>(e.stream),
            static_cast<bool>(e.position),    e.encode && e.decode};
  }
};

}  // namespace idem
