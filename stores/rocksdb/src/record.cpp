#include "record.hpp"

#include "little_endian.hpp"

namespace idem::rocksdb::detail {
namespace {

constexpr std::size_t kHeader = 10;
constexpr unsigned char kHasFingerprint = 1;
constexpr unsigned char kHasResult = 2;

void put_header(std::string& out, RecordKind kind, std::int64_t expires_ms) {
  out.push_back(static_cast<char>(kRecordFormat));
  out.push_back(static_cast<char>(kind));
  put_le<std::int64_t>(out, expires_ms);
}

}  // namespace

std::string encode_done(RecordKind kind, std::int64_t expires_ms, std::optional<std::uint64_t> fingerprint,
                        std::optional<std::string_view> result) {
  std::string out;
  out.reserve(kHeader + 1 + 8 + (result ? result->size() : 0));
  put_header(out, kind, expires_ms);
  out.push_back(static_cast<char>((fingerprint ? kHasFingerprint : 0) | (result ? kHasResult : 0)));
  if (fingerprint) put_le<std::uint64_t>(out, *fingerprint);
  if (result) out.append(*result);
  return out;
}

std::string encode_retries(const RetryRecord& r) {
  std::string out;
  out.reserve(kHeader + 4);
  put_header(out, RecordKind::kRetries, r.expires_ms);
  put_le<std::uint32_t>(out, r.retries);
  return out;
}

std::optional<std::int64_t> expiry_of(std::string_view v) {
  if (v.size() < kHeader || static_cast<unsigned char>(v[0]) != kRecordFormat) return std::nullopt;
  return get_le<std::int64_t>(v, 2);
}

std::optional<DoneRecord> decode_done(std::string_view v) {
  if (v.size() < kHeader + 1 || static_cast<unsigned char>(v[0]) != kRecordFormat) return std::nullopt;
  DoneRecord r;
  r.kind = static_cast<RecordKind>(v[1]);
  if (r.kind != RecordKind::kCompleted && r.kind != RecordKind::kDeadLettered) return std::nullopt;
  r.expires_ms = get_le<std::int64_t>(v, 2);
  const auto flags = static_cast<unsigned char>(v[kHeader]);
  if ((flags & ~(kHasFingerprint | kHasResult)) != 0) return std::nullopt;  // not written by this format
  std::size_t at = kHeader + 1;
  if (flags & kHasFingerprint) {
    if (v.size() < at + 8) return std::nullopt;
    r.fingerprint = get_le<std::uint64_t>(v, at);
    at += 8;
  }
  if (flags & kHasResult) {
    r.result = std::string(v.substr(at));
  } else if (at != v.size()) {
    return std::nullopt;
  }
  return r;
}

std::optional<RetryRecord> decode_retries(std::string_view v) {
  if (v.size() != kHeader + 4 || static_cast<unsigned char>(v[0]) != kRecordFormat ||
      static_cast<RecordKind>(v[1]) != RecordKind::kRetries)
    return std::nullopt;
  return RetryRecord{get_le<std::uint32_t>(v, kHeader), get_le<std::int64_t>(v, 2)};
}

}  // namespace idem::rocksdb::detail
