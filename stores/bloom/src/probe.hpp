// libbloom 1.6's bit positions for an id, computed once per id and tested against
// any number of filters of one geometry.
//
// libbloom sets, for i in [0, hashes): bit (a + i*b) mod bits (32-bit unsigned
// arithmetic), with a = murmurhash2(id, 0x9747b28c) and b = murmurhash2(id, a); bit x
// is bit (x & 7) of byte x >> 3. bloom_check and bloom_add hash the id on every call
// and divide once per bit. Every generation of a Generations has the same geometry
// (bits, hashes), so a lookup over N filters needs the pair (a, b) once and one
// position per bit index, shared by all filters; the division becomes a
// multiplication (Lemire's fastmod, exact for 32-bit operands). The bits set are
// exactly libbloom's: filters stay readable by bloom_check and snapshots keep their
// format (tests/bloom/bloom_probe_test.cpp compares the bit arrays byte for byte).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace idem::bloom::detail {

__extension__ using Uint128 = unsigned __int128;  // GCC and Clang

// MurmurHash2 (Austin Appleby, public domain), as libbloom 1.6 computes it: 4-byte
// blocks read in host order (little-endian on the platforms idem supports).
inline std::uint32_t murmurhash2(const void* key, int len, std::uint32_t seed) {
  constexpr std::uint32_t m = 0x5bd1e995;
  constexpr int r = 24;
  std::uint32_t h = seed ^ static_cast<std::uint32_t>(len);
  const auto* data = static_cast<const unsigned char*>(key);
  while (len >= 4) {
    std::uint32_t k;
    std::memcpy(&k, data, sizeof k);
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
    data += 4;
    len -= 4;
  }
  switch (len) {
    case 3: h ^= static_cast<std::uint32_t>(data[2]) << 16; [[fallthrough]];
    case 2: h ^= static_cast<std::uint32_t>(data[1]) << 8; [[fallthrough]];
    case 1:
      h ^= data[0];
      h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return h;
}

// The (a, b) pair of an id: its whole probe sequence.
struct Probe {
  std::uint32_t a = 0;
  std::uint32_t b = 0;
};

inline constexpr std::uint32_t kLibbloomSeed = 0x9747b28c;

// REQUIRES: id.size() <= INT32_MAX (libbloom takes the length as an int).
inline Probe probe_of(std::string_view id) {
  const int len = static_cast<int>(id.size());
  Probe p;
  p.a = murmurhash2(id.data(), len, kLibbloomSeed);
  p.b = murmurhash2(id.data(), len, p.a);
  return p;
}

// The geometry shared by a set of filters: bit count and number of bits per id.
class Geometry {
 public:
  Geometry() = default;
  // REQUIRES: bits > 0, hashes > 0 (as bloom_init makes them).
  Geometry(std::uint32_t bits, std::uint32_t hashes)
      : bits_(bits), hashes_(hashes), magic_(~std::uint64_t{0} / bits + 1) {}

  std::uint32_t bits() const { return bits_; }
  std::uint32_t hashes() const { return hashes_; }

  // x mod bits, without a division.
  std::uint32_t mod(std::uint32_t x) const {
    const std::uint64_t low = magic_ * x;
    return static_cast<std::uint32_t>((static_cast<Uint128>(low) * bits_) >> 64);
  }

  // Sets p's bits in bf (a bit array of this geometry). Returns true iff at least one
  // was clear (libbloom's bloom_add returning 0: "added").
  bool set(unsigned char* bf, Probe p) const {
    bool added = false;
    std::uint32_t x = p.a;
    for (std::uint32_t i = 0; i < hashes_; ++i, x += p.b) {
      const std::uint32_t bit = mod(x);
      const auto mask = static_cast<unsigned char>(1u << (bit & 7));
      unsigned char& byte = bf[bit >> 3];
      added |= (byte & mask) == 0;
      byte |= mask;
    }
    return added;
  }

  // True iff all of p's bits are set in bf (libbloom's bloom_check returning 1).
  bool test(const unsigned char* bf, Probe p) const {
    std::uint32_t x = p.a;
    for (std::uint32_t i = 0; i < hashes_; ++i, x += p.b) {
      const std::uint32_t bit = mod(x);
      if ((bf[bit >> 3] & (1u << (bit & 7))) == 0) return false;
    }
    return true;
  }

  // Asks the CPU to load the bytes of bf holding the first `count` of p's bits (at
  // most hashes()), for writing if `for_write`. A hint: never faults, changes nothing.
  void prefetch(const unsigned char* bf, Probe p, std::uint32_t count, bool for_write) const {
    std::uint32_t x = p.a;
    for (std::uint32_t i = 0; i < count && i < hashes_; ++i, x += p.b) {
      const unsigned char* at = bf + (mod(x) >> 3);
      if (for_write) {
        __builtin_prefetch(at, 1);
      } else {
        __builtin_prefetch(at, 0);
      }
    }
  }

  // True iff some filter of `filters` (n bit arrays of this geometry) holds all of p's
  // bits. Each position is computed once for all filters; a filter leaves the search
  // at its first clear bit. Reorders `filters`.
  bool test_any(const unsigned char** filters, std::size_t n, Probe p) const {
    std::uint32_t x = p.a;
    for (std::uint32_t i = 0; i < hashes_ && n > 0; ++i, x += p.b) {
      const std::uint32_t bit = mod(x);
      const std::size_t at = bit >> 3;
      const unsigned mask = 1u << (bit & 7);
      for (std::size_t k = 0; k < n;) {
        if ((filters[k][at] & mask) == 0) {
          filters[k] = filters[--n];
        } else {
          ++k;
        }
      }
    }
    return n > 0;
  }

 private:
  std::uint32_t bits_ = 1;
  std::uint32_t hashes_ = 0;
  std::uint64_t magic_ = 0;  // ceil(2^64 / bits)
};

}  // namespace idem::bloom::detail
