// JSON messages without hand-written extractors: a Format says where a message's id,
// entity key, version and event are (JSON pointers into the body, broker headers, or
// the broker's own id), reads each delivery into a json::Message, and gives the
// Extractors and the Runtime decoder over it (docs/runtime.md).
//
//   auto format = idem::json::Format::create({.id = "/id", .key = "/account", .version = "/version"}).value();
//   auto consumer = idem::Consumer<idem::json::Message>::create(opts, format.extractors(),
//       [](const idem::json::Message& m, idem::HandlerContext& ctx) {
//         credit(m.key, m.doc.at("amount").get<std::int64_t>());  // a throw: handler failure
//         return idem::HandlerResult::ok();
//       }).value();
//   auto rt = idem::Runtime<idem::json::Message>::create(ro, *source, consumer, format.decoder()).value();
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "idem/message.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace idem::json {

// Where each field of a message is read from, one of:
//   "/a/b"         a JSON pointer (RFC 6901) into the body: a string, or an integer
//                  (read as its decimal text; the version: a non-negative integer or a
//                  string of decimal digits)
//   "header:NAME"  the value of the broker header NAME (the first one of that name)
//   "broker"       the broker's id of the delivery (Delivery::broker_id); id only
//   ""             not read: the consumer gets no such extractor
struct Fields {
  std::string id = "/id";
  std::string key;      // the entity key (ordering, state machines)
  std::string version;  // the entity version (ordering)
  std::string event;    // the state-machine event
};

// One message as read by a Format. A field whose Fields entry is empty is left empty.
struct Message {
  std::string body;    // the body as it arrived; the payload that is fingerprinted
  nlohmann::json doc;  // the body parsed; null when no field is read from the body and it is not JSON
  std::string id;
  std::string key;
  std::uint64_t version = 0;
  std::string event;
  // From the delivery, for ordering=watermark and the queue-wait metric; not kept
  // across the reorder buffer.
  std::string partition;
  std::uint64_t position = 0;
  std::uint32_t delivery_count = 0;
  TimePoint received_at{};
};

class Format {
 public:
  // Returns kInvalidArgument naming the field for a spec of none of the forms above,
  // a pointer that is not valid, "broker" for another field than the id, or an empty id.
  static StatusOr<Format> create(Fields fields);

  // Reads a delivery. Returns kInvalidArgument for a body that is not JSON while a
  // field is read from it, or a field that is missing or of the wrong type (the
  // message names the field and its spec, never the body). Under a Runtime that
  // error dead-letters the delivery with reason bad_message.
  StatusOr<Message> read(const Delivery& d) const;

  // Extractors over Message: the fields this format reads, the body as payload, the
  // delivery's partition and position as stream and position (when it has them), its
  // delivery count and receipt time, and encode/decode for the reorder buffer.
  Extractors<Message> extractors() const;

  // read() as a Runtime<Message>::Decoder.
  std::function<StatusOr<Message>(const Delivery&)> decoder() const;

  const Fields& fields() const { return fields_; }

 private:
  explicit Format(Fields fields) : fields_(std::move(fields)) {}
  Fields fields_;
};

}  // namespace idem::json
