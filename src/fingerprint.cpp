#include "idem/fingerprint.hpp"

#include <xxhash.h>

namespace idem {

std::uint64_t fingerprint(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace idem
