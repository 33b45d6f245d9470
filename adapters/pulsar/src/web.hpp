// The two ways the Pulsar adapter talks to a broker's web service port, over
// Boost.Beast: a WebSocket (the producer and consumer endpoints of Pulsar's WebSocket
// API) and one-shot HTTP requests (the admin REST API). Both run on the caller's
// thread with deadlines; neither is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/backend/tls_options.hpp"
#include "idem/status.hpp"

namespace idem::pulsar::detail {

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty; never logged
  TlsOptions tls;     // HTTPS and wss:// when enabled
};

// One WebSocket. Reads are asynchronous underneath, so a read that times out leaves
// the connection usable and the frame still coming.
class WebSocket {
 public:
  // Connects to `target` (a path with its query) within `timeout`. kUnavailable when
  // nothing answers; kFailedPrecondition when the broker refuses the upgrade (its HTTP
  // status and body, which never hold the token, are in the message) or TLS fails its
  // checks; kInvalidArgument when a TLS file cannot be loaded.
  static StatusOr<std::unique_ptr<WebSocket>> connect(const Endpoint& e, const std::string& target,
                                                      std::chrono::milliseconds timeout);
  ~WebSocket();
  WebSocket(const WebSocket&) = delete;
  WebSocket& operator=(const WebSocket&) = delete;

  // Sends one text frame within `timeout`.
  Status write(std::string_view text, std::chrono::milliseconds timeout);
  // Reads one text frame into *out: true when one came within `timeout` (0: only one
  // already received), false when none did. kUnavailable once the connection is lost.
  StatusOr<bool> read(std::string* out, std::chrono::milliseconds timeout);
  bool open() const;
  // Sends a close frame (best effort, briefly) and closes the socket.
  void close();

 private:
  struct Impl;
  explicit WebSocket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One HTTP/1.1 request on a new connection: METHOD `target` with `body` (JSON when not
// empty). Returns the status code and sets *response to the body. kUnavailable when
// the broker cannot be reached or does not answer within `timeout`.
StatusOr<int> http_request(const Endpoint& e, std::string_view method, const std::string& target,
                           const std::string& body, std::string* response, std::chrono::milliseconds timeout);

}  // namespace idem::pulsar::detail
