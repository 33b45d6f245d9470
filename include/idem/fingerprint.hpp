// Payload fingerprints for conflict detection.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem {

// A 64-bit XXH3 hash of the bytes. Stable across versions and machines: it is
// persisted by the stores.
std::uint64_t fingerprint(std::string_view bytes);

}  // namespace idem
