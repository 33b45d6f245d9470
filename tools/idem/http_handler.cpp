// `--handler http://…` or `https://…`: each message POSTed to the service, one
// keep-alive connection per worker (cpp-httplib; built with its OpenSSL support).
#include <httplib.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "external_handler.hpp"

namespace idem::cli {
namespace {

// A header value: printable ASCII as it is, any other byte (and '%') as %XX.
std::string header_value(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Retry-After as a delay: delta-seconds, or an HTTP date (RFC 9110); nullopt if neither.
std::optional<Duration> retry_after(const std::string& value) {
  if (!value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
    return Duration(std::min<long long>(std::stoll(value.substr(0, 9)), 86'400LL * 365) * 1000);
  tm t{};
  const char* end = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &t);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const auto at = std::chrono::system_clock::from_time_t(timegm(&t));
  const auto wait = std::chrono::duration_cast<Duration>(at - std::chrono::system_clock::now());
  return std::max(wait, Duration(0));
}

// What one answer of the service gave.
Outcome answer(const httplib::Response& r, std::size_t max_result_bytes) {
  const std::string what = "the handler answered " + std::to_string(r.status);
  if (r.status >= 200 && r.status < 300) return {HandlerResult::ok(r.body.substr(0, max_result_bytes))};
  if (r.status == 429 || r.status == 503) {
    if (auto delay = retry_after(r.get_header_value("Retry-After"))) return {HandlerResult::retry_after(*delay, what)};
  }
  const bool down = r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504;
  if (r.status >= 400 && r.status < 500 && !down) return {HandlerResult::reject(what + ": " + external::head(r.body))};
  return {HandlerResult::fail(what + ": " + external::head(r.body)),
          down ? Outcome::Service::kUnavailable : Outcome::Service::kAnswered};
}

class HttpHandler final : public ExternalHandler {
 public:
  HttpHandler(std::string base, std::string path, ExternalHandlerOptions o)
      : base_(std::move(base)), path_(std::move(path)), o_(o) {}

  // Idem-Timeout-Ms is how long idem waits before it closes the connection: a service
  // that stops by then never runs a message while idem calls it again.
  Outcome call(const json::Message& m, HandlerContext& ctx, std::chrono::steady_clock::time_point deadline) override {
    std::unique_ptr<httplib::Client> c = take();
    const auto start = std::chrono::steady_clock::now();
    httplib::Headers h{{"Idem-Id", header_value(m.id)},
                       {"Idem-Attempt", std::to_string(ctx.attempt())},
                       {"Idem-Timeout-Ms", std::to_string(external::ms_left(deadline))}};
    if (!m.key.empty()) h.emplace("Idem-Key", header_value(m.key));
    if (m.version > 0) h.emplace("Idem-Version", std::to_string(m.version));
    if (!m.event.empty()) h.emplace("Idem-Event", header_value(m.event));
    const char* type = m.doc.is_null() ? "application/octet-stream" : "application/json";
    httplib::Result r = c->Post(path_, h, m.body, type);
    if (!r && r.error() == httplib::Error::Read && std::chrono::steady_clock::now() - start >= o_.timeout)
      return {HandlerResult::fail(external::timed_out(o_.timeout)), Outcome::Service::kSilent};
    // Not connected: the request never left, so nothing happened to the message.
    const bool not_sent = r.error() == httplib::Error::Connection || r.error() == httplib::Error::ConnectionTimeout;
    if (!r)
      return {HandlerResult::fail("the handler could not be reached: " + httplib::to_string(r.error())),
              not_sent ? Outcome::Service::kUnavailable : Outcome::Service::kSilent};
    Outcome out = answer(*r, o_.max_result_bytes);
    give_back(std::move(c));
    return out;
  }

 private:
  // An idle connection, or a new one.
  std::unique_ptr<httplib::Client> take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return connect();
  }

 public:
  // A new connection; https:// with the options' verification (cpp-httplib checks the
  // chain, against the system's trust store without a CA file, and the host name or
  // IP address).
  std::unique_ptr<httplib::Client> connect() const {
    const TlsOptions& t = o_.tls;
    auto c = std::make_unique<httplib::Client>(base_, t.cert_file, t.key_file);
    if (!t.ca_file.empty()) c->set_ca_cert_path(t.ca_file.c_str());
    c->enable_server_certificate_verification(!t.insecure);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // headers and body may be two writes
    c->set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o_.timeout));
    c->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o_.timeout));
    c->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(o_.timeout));
    return c;
  }

 private:
  void give_back(std::unique_ptr<httplib::Client> c) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(c));
  }

  const std::string base_, path_;
  const ExternalHandlerOptions o_;
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;
};

}  // namespace

StatusOr<std::unique_ptr<ExternalHandler>> open_http_handler(std::string_view url, const ExternalHandlerOptions& options) {
  const std::size_t authority = url.find("://") + 3;
  const std::size_t slash = url.find('/', authority);
  const std::string base(url.substr(0, slash));
  const std::string path(slash == std::string_view::npos ? "/" : url.substr(slash));
  if (base.size() == authority) return invalid_argument("--handler: the URL has no host");
  auto handler = std::make_unique<HttpHandler>(base, path, options);
  if (url.starts_with("https://")) {
    // A HEAD of the path: an answer of any status proves the certificate; one that
    // cannot be verified stops the start here rather than failing every message.
    const httplib::Result r = handler->connect()->Head(path);
    const bool refused =
        r.error() == httplib::Error::SSLServerVerification || r.error() == httplib::Error::SSLConnection;
    if (!r && refused)
      return failed_precondition("--handler: the TLS handshake with " + base + " failed (" +
                                 httplib::to_string(r.error()) + "): check its certificate, --handler-ca and the name");
  }
  return std::unique_ptr<ExternalHandler>(std::move(handler));
}

}  // namespace idem::cli
