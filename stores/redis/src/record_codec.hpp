// The client-side encoding of record values, decodable by the scripts' decode() (a
// MessagePack array; see scripts.cpp), so that a claim of a fresh id can be a plain
// SET NX PX without a script and a commit script need not encode or decode anything
// in its common case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::redis::detail {

// [ 'i', owner, lease_until_ms, 0, 0, fingerprint (decimal) | false, false ]
std::string encode_fresh_lease(std::string_view owner, std::int64_t lease_until_ms,
                               const std::optional<std::uint64_t>& fingerprint);
// The same, appended to out (so that a batch reuses one buffer).
void append_fresh_lease(std::string& out, std::string_view owner, std::int64_t lease_until_ms,
                        const std::optional<std::uint64_t>& fingerprint);

// [ state ('c' or 'x'), '', 0, expires_ms, 0, fingerprint | false, result | false ]
std::string encode_done(char state, std::int64_t expires_ms, const std::optional<std::uint64_t>& fingerprint,
                        const std::optional<std::string_view>& result);
// The same, appended to out.
void append_done(std::string& out, char state, std::int64_t expires_ms, const std::optional<std::uint64_t>& fingerprint,
                 const std::optional<std::string_view>& result);

// The first bytes of every in-progress record of `owner`: [ 'i', owner, … — a commit
// whose old value starts with them is the owner's own lease (held or expired).
std::string lease_prefix(std::string_view owner);

// A reorder-buffer entry after its 8 version bytes: [ id, message, at_ms ].
std::string encode_buffer_entry(std::string_view id, std::string_view message, std::int64_t at_ms);

}  // namespace idem::redis::detail
