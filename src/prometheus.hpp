// Internal: Prometheus text exposition helpers shared by Metrics and RuntimeMetrics.
#pragma once

#include <string>
#include <string_view>

#include "idem/metrics.hpp"

namespace idem::detail {

// Appends histogram `name` (HELP, TYPE, cumulative buckets, sum and count) to out.
void append_histogram(std::string& out, const std::string& name, std::string_view help, const HistogramSnapshot& h);

}  // namespace idem::detail
