// open_store(URI): one entry point over every backend this build enabled.
#pragma once

#include <memory>
#include <string_view>

#include "idem/store.hpp"

namespace idem {

// Opens the store a URI names: "memory:[?max_records=N]", "sqlite:PATH[?…]", and the
// other backends compiled in. Returns kInvalidArgument for an unknown scheme (naming
// the schemes this build knows) or bad parameters, and the backend's error otherwise.
StatusOr<std::shared_ptr<Store>> open_store(std::string_view uri);

}  // namespace idem
