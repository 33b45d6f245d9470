#include "idem/clock.hpp"

namespace idem {

std::shared_ptr<Clock> system_clock() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace idem
