// The store conformance suite's factory for idem::redis: each location is a fresh key
// prefix on one running server or cluster (given by its URI).
#pragma once

#include <functional>
#include <string>

#include "conformance/store_conformance.hpp"

namespace idem::redis_test {

// `uri` is called when a test opens its first store (so servers start lazily).
conformance::StoreFactory redis_factory(std::string name, std::function<std::string()> uri);

}  // namespace idem::redis_test
