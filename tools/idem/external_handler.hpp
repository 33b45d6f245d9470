// The handler of `idem consume --handler`: a service outside this process, reached
// over HTTP (`http://HOST:PORT/PATH`) or through a child process speaking JSON lines
// (`exec:COMMAND`). tools/idem/README.md states the protocols; this file maps their
// answers onto HandlerResult.
#pragma once

#include <chrono>
#include <cstdint>
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
  // How long one call may take before it counts as a failure (and, for exec:, the
  // child is replaced): the call's deadline is when it starts plus this.
  Duration timeout{30'000};
  // Bytes of a successful answer's result stored with the record (and returned to
  // duplicates); the rest is cut off. ConsumerOptions::max_result_bytes.
  std::size_t max_result_bytes = 64 * 1024;
  // For an https:// service: the CA (empty: the system's trust store), a client
  // certificate and key, and whether to skip verifying its certificate and name.
  TlsOptions tls;
};

// What one call of the service gave.
struct Outcome {
  // Whether the service answered; the pause for an unavailable one (HandlerPause) ends
  // at an answer, not at a call that timed out or was cut off.
  enum class Service {
    kAnswered,
    kSilent,  // no answer: timed out, connection cut, the exec child exited
    // Not reached (its connection refused, or not made in time) or said that it is
    // down (502, 503 or 504, or 429, without Retry-After): nothing happened to the
    // message, so the call is tried again without spending its retries.
    kUnavailable,
  };
  HandlerResult result;
  Service service = Service::kAnswered;
};

class ExternalHandler {
 public:
  virtual ~ExternalHandler() = default;
  // Calls the handler with m, telling it how long idem waits for the answer (the time
  // left until `deadline` as the request leaves: a duration, not a time of day, so the
  // service's clock need not agree with this host's), and maps its answer; never
  // throws. Thread-safe: each concurrent caller (a worker) gets its own connection or
  // child.
  virtual Outcome call(const json::Message& m, HandlerContext& ctx, std::chrono::steady_clock::time_point deadline) = 0;
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

// "the handler timed out after N ms".
std::string timed_out(Duration timeout);

// The whole milliseconds left until deadline, at least 1: what the service is told
// (a 0 could read as "no timeout").
std::int64_t ms_left(std::chrono::steady_clock::time_point deadline);

}  // namespace external
}  // namespace idem::cli
