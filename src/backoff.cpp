#include <algorithm>
#include <cmath>

#include "idem/options.hpp"

namespace idem {

Duration Backoff::delay_for(std::uint32_t retries_so_far) const {
  // Computed in double so that large exponents saturate at max instead of overflowing.
  const double ms = static_cast<double>(initial.count()) * std::pow(multiplier, static_cast<double>(retries_so_far));
  const double capped = std::min(ms, static_cast<double>(max.count()));
  return Duration(static_cast<Duration::rep>(std::max(0.0, capped)));
}

}  // namespace idem
