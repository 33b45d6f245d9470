#pragma once

#include "idem/message.hpp"
#include "idem/options.hpp"
#include "idem/status.hpp"

namespace idem::detail {

// Returns kInvalidArgument naming the option to change, or OK.
Status validate_options(const ConsumerOptions& options, const ExtractorSet& extractors);

}  // namespace idem::detail
