// Where the entity extension keeps its data (docs/stores.md, "Entity records and the
// reorder buffer"), and the binary encodings its scripts share with the client.
//
// Every key of one entity starts with <prefix>{T}, T = escape(entity key), so that
// they all hash to one Redis Cluster slot:
//   <prefix>{T}:e          hash   r → revision, v → version, s → state (decimal/bytes)
//   <prefix>{T}:b          zset   score 0, member ver8 ‖ MessagePack [id, message, at_ms]
//   <prefix>{T}:t          zset   score buffered_at ms, member ver8
//   <prefix>{T}:d:escape(id)      on a cluster, the record of an id claimed with this
//                                 entity key (standalone: <prefix>{id} as always)
// The buffer totals and the index of keys with entries are global:
//   <prefix>{%}:totals     hash   count, bytes
//   <prefix>{%}:index      zset   score oldest buffered_at ms, member the raw entity key
// escape() maps '%' to "%25" and '}' to "%7D": T is never empty and holds no '}', so
// it is the whole hash tag; "%" alone is no escape() output, so the global tag is
// nobody's entity. Keys of this layout never end in '}', every id key without an
// entity (<prefix>{id}) does: the two layouts cannot collide.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/clock.hpp"

namespace idem::redis::detail {

// '%' → "%25", '}' → "%7D", every other byte as it is.
std::string escape_tag(std::string_view bytes);

// The keys of one entity (see above).
struct EntityKeys {
  std::string record;  // :e
  std::string buffer;  // :b
  std::string times;   // :t
};
EntityKeys entity_keys(const std::string& prefix, std::string_view entity_key);
// The dedup record of id placed by entity_key.
std::string entity_id_key(const std::string& prefix, std::string_view entity_key, std::string_view id);
std::string buffer_totals_key(const std::string& prefix);
std::string buffer_index_key(const std::string& prefix);

// The version as 8 bytes big-endian (byte order = numeric order), and back.
std::string ver8(std::uint64_t version);
std::uint64_t from_ver8(std::string_view bytes);

// ZRANGEBYLEX bounds that select exactly the buffer entries of `version`.
std::string lex_lo(std::uint64_t version);
std::string lex_hi(std::uint64_t version);

}  // namespace idem::redis::detail
