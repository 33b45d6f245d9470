// The broker adapters this idem binary was built with, chosen by a URI's scheme:
// `idem consume --source URI`, `idem publish --to URI`.
#pragma once

#include <memory>
#include <string>

#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace idem::cli {

// What a source takes from the consumer's own flags.
struct SourceSettings {
  Duration lease{30'000};  // the store's lease: the broker's redelivery timeout where it has one
};

// Opens the source `uri` names. Errors: kInvalidArgument for a malformed URI or an
// unknown scheme (the message never contains a password); what the adapter returns
// when the broker cannot be reached or refuses.
StatusOr<std::unique_ptr<MessageSource>> open_source(const std::string& uri, const SourceSettings& settings);

// Opens a publisher to the destination `uri` names (a source URI; its consumer
// parameters are not needed). Errors as open_source.
StatusOr<std::unique_ptr<Publisher>> open_publisher(const std::string& uri);

// One line per URI form this binary knows, for --help.
std::string broker_uri_help();

}  // namespace idem::cli
