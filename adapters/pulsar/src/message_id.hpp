// Pulsar message ids as the WebSocket API carries them, and the base64 of its
// payloads.
//
// A message id is the base64 of Pulsar's MessageIdData (protobuf): ledger id (field
// 1), entry id (2), partition (3), batch index (4). Within one topic partition the
// order of (ledger, entry, batch index) is the order of the messages, so position()
// packs them into one number that keeps that order:
//   ledger << 40 | entry << 12 | batch index
// which holds while ledger < 2^24, entry < 2^28 and batch index < 2^12 (a broker rolls
// its ledger over long before 2^28 entries; ledger ids count up from 0 per cluster).
// Beyond that, position() is 0: the message has no comparable position.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::pulsar::detail {

struct MessageId {
  std::uint64_t ledger = 0;
  std::uint64_t entry = 0;
  std::int64_t partition = -1;
  std::int64_t batch_index = -1;
};

// Decodes the WebSocket API's message id; nullopt when it is not one.
std::optional<MessageId> parse_message_id(std::string_view base64);
// The packed position described above, or 0 when the id does not fit.
std::uint64_t position(const MessageId& id);
// "ledger:entry[:batch index]", for logs.
std::string to_string(const MessageId& id);

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace idem::pulsar::detail
