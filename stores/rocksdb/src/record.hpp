// The byte formats of the values in idem_done and idem_retries (docs/stores.md).
// Every value starts with the same 10-byte header, so that one compaction filter can
// read the expiry of either kind:
//   [0]     format (kRecordFormat)
//   [1]     kind (RecordKind)
//   [2..9]  expires_at, ms since the Unix epoch, int64 little-endian
// idem_done continues with
//   [10]    flags: bit 0 a fingerprint follows, bit 1 a result follows
//   [11..18] fingerprint, uint64 little-endian (if flagged)
//   [..]    result bytes, to the end of the value (if flagged)
// idem_retries continues with
//   [10..13] retry count, uint32 little-endian
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::rocksdb::detail {

inline constexpr unsigned char kRecordFormat = 1;

enum class RecordKind : unsigned char { kCompleted = 1, kDeadLettered = 2, kRetries = 3 };

struct DoneRecord {
  RecordKind kind = RecordKind::kCompleted;
  std::int64_t expires_ms = 0;
  std::optional<std::uint64_t> fingerprint;
  std::optional<std::string> result;
};

struct RetryRecord {
  std::uint32_t retries = 0;
  std::int64_t expires_ms = 0;
};

std::string encode_done(RecordKind kind, std::int64_t expires_ms, std::optional<std::uint64_t> fingerprint,
                        std::optional<std::string_view> result);
std::string encode_retries(const RetryRecord& r);

// Return nullopt for a value that is not of this format and kind.
std::optional<DoneRecord> decode_done(std::string_view value);
std::optional<RetryRecord> decode_retries(std::string_view value);

// The expiry in the common header, or nullopt for a value of an unknown format.
std::optional<std::int64_t> expiry_of(std::string_view value);

}  // namespace idem::rocksdb::detail
