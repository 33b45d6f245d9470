// The handler of `idem consume --handler`: a service outside this process, reached
// over HTTP (`http://HOST:PORT/PATH`) or through a child process speaking JSON lines
// (`exec:COMMAND`). tools/idem/README.md states the protocols; this file maps their
// answers onto HandlerResult.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "idem/backend/tls_options.hpp"
#include "idem/clock.hpp"
#include "idem/handler.hpp"
#include "idem/json_format.hpp"
#include "idem/status.hpp"

namespace idem::cli {

struct ExternalHandlerOptions {
  // ms; how long one call may take before it counts as a failure (and, for exec:, the
  // child is restarted). Also the lease the call holds: a longer one extends it.
  Duration timeout{30'000};
  // Bytes of a successful answer's result stored with the record (and returned to
  // duplicates); the rest is cut off. ConsumerOptions::max_result_bytes.
  std::size_t max_result_bytes = 64 * 1024;
  // For an https:// service: the CA (empty: the system's trust store), a client
  // certificate and key, and whether to skip verifying its certificate and name.
  TlsOptions tls;
};

class ExternalHandler {
 public:
  virtual ~ExternalHandler() = default;
  // Calls the handler with m and maps its answer; never throws. Thread-safe: each
  // concurrent caller (a worker) gets its own connection or child.
  virtual HandlerResult call(const json::Message& m, HandlerContext& ctx) = 0;
};

// Opens the handler `spec` names: "http://HOST:PORT[/PATH]" or "exec:COMMAND" (run by
// /bin/sh -c, one child per worker, started on first use). kInvalidArgument for any
// other form.
StatusOr<std::unique_ptr<ExternalHandler>> open_external_handler(std::string_view spec,
                                                                 const ExternalHandlerOptions& options);

// The two kinds open_external_handler chooses from: url is "http://…" or "https://…";
// command is what follows "exec:". An https:// service is reached once at open: a
// certificate that cannot be verified is kFailedPrecondition then, instead of failing
// every message (a service that does not answer yet is not an error).
StatusOr<std::unique_ptr<ExternalHandler>> open_http_handler(std::string_view url, const ExternalHandlerOptions& options);
StatusOr<std::unique_ptr<ExternalHandler>> open_exec_handler(std::string_view command,
                                                             const ExternalHandlerOptions& options);

// The pieces both protocols share.
namespace external {

// Whether bytes are valid UTF-8 (JSON text must be).
bool valid_utf8(std::string_view bytes);

// bytes in standard base64, with padding.
std::string base64(std::string_view bytes);

// The first `max` bytes of text, for error details ("…" marks a cut).
std::string head(std::string_view text, std::size_t max = 200);

}  // namespace external
}  // namespace idem::cli
