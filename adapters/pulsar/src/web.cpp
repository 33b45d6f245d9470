#include "web.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <type_traits>

#include "openssl_client.hpp"

namespace idem::pulsar::detail {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::string where(const Endpoint& e) { return e.host + ":" + std::to_string(e.port); }

Status lost(const Endpoint& e, std::string_view what, const beast::error_code& ec) {
  return unavailable("pulsar " + where(e) + ": " + std::string(what) + ": " + ec.message());
}

// Runs ioc's handlers until done() or `timeout` has passed; returns done().
template <class Done>
bool run_until(net::io_context& ioc, Done done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (ioc.stopped()) ioc.restart();
    const auto now = Clock::now();
    if (now >= deadline) {
      ioc.poll();
      return done();
    }
    if (ioc.run_one_for(deadline - now) == 0 && ioc.stopped()) {
      ioc.restart();
      ioc.poll();
      return done();
    }
  }
  return true;
}

// Runs ioc until it has nothing left to do.
void run(net::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

// Resolves and connects `stream` to e within its expiry.
beast::error_code connect_tcp(net::io_context& ioc, beast::tcp_stream& stream, const Endpoint& e) {
  tcp::resolver resolver(ioc);
  beast::error_code result = net::error::would_block;
  resolver.async_resolve(e.host, std::to_string(e.port), [&](beast::error_code ec, tcp::resolver::results_type r) {
    if (ec) {
      result = ec;
      return;
    }
    stream.async_connect(r, [&](beast::error_code ec2, const tcp::endpoint&) { result = ec2; });
  });
  run(ioc);
  return result;
}

// The TLS context of e (null without TLS): tls::client_context's, owned by Asio.
StatusOr<std::shared_ptr<net::ssl::context>> tls_context(const Endpoint& e) {
  if (!e.tls.enabled) return std::shared_ptr<net::ssl::context>();
  auto ctx = tls::client_context(e.tls);
  if (!ctx.ok()) return invalid_argument("pulsar: " + ctx.status().message());
  return std::make_shared<net::ssl::context>(ctx->release());
}

// Connects `stream`'s TCP layer to e and, for a TLS stream, runs the handshake with
// e's host checked; both within the stream's expiry.
template <class Stream>
Status connect_stream(net::io_context& ioc, Stream& stream, const Endpoint& e) {
  auto& tcp_layer = beast::get_lowest_layer(stream);
  if (auto ec = connect_tcp(ioc, tcp_layer, e); ec) return lost(e, "connect", ec);
  beast::error_code ignored;
  tcp_layer.socket().set_option(tcp::no_delay(true), ignored);  // acks and permits are small frames
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    SSL* ssl = stream.native_handle();
    if (Status s = tls::expect_host(ssl, e.host, e.tls.insecure); !s.ok())
      return failed_precondition("pulsar " + where(e) + ": " + s.message());
    beast::error_code result = net::error::would_block;
    stream.async_handshake(net::ssl::stream_base::client, [&](beast::error_code ec) { result = ec; });
    run(ioc);
    if (result) {
      std::string why = tls::handshake_failure(ssl);
      // Asio empties OpenSSL's error queue into the error code: a TLS-level failure
      // (not a lost connection) is in the SSL category.
      if (why.empty() && result.category() == net::error::get_ssl_category())
        why = "the handshake failed: " + result.message();
      if (!why.empty()) return failed_precondition("pulsar " + where(e) + ": TLS: " + why);
      return lost(e, "TLS handshake", result);
    }
  }
  return ok_status();
}

// One WebSocket, over TCP or TLS (Next: beast::tcp_stream or TlsStream). Reads are
// asynchronous underneath, so a read that times out leaves the connection usable.
class Session {
 public:
  virtual ~Session() = default;
  virtual Status write(std::string_view text, std::chrono::milliseconds timeout) = 0;
  virtual StatusOr<bool> read(std::string* out, std::chrono::milliseconds timeout) = 0;
  virtual bool open() const = 0;
  virtual void close() = 0;
};

template <class Next>
class WsSession final : public Session {
  static constexpr bool kTls = std::is_same_v<Next, TlsStream>;

 public:
  WsSession(Endpoint e, std::shared_ptr<net::ssl::context> ctx)
    requires(!kTls)
      : endpoint_(std::move(e)), ws_(ioc_) {}
  WsSession(Endpoint e, std::shared_ptr<net::ssl::context> ctx)
    requires(kTls)
      : endpoint_(std::move(e)), ctx_(std::move(ctx)), ws_(ioc_, *ctx_) {}
  ~WsSession() override { close(); }

  Status connect(const std::string& target, std::chrono::milliseconds timeout) {
    auto& tcp_layer = beast::get_lowest_layer(ws_);
    tcp_layer.expires_after(timeout);
    if (Status s = connect_stream(ioc_, ws_.next_layer(), endpoint_); !s.ok()) return s;
    ws_.set_option(websocket::stream_base::decorator([token = endpoint_.token](websocket::request_type& req) {
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    }));
    websocket::response_type res;
    beast::error_code result = net::error::would_block;
    ws_.async_handshake(res, where(endpoint_), target, [&](beast::error_code ec) { result = ec; });
    run(ioc_);
    if (result == websocket::error::upgrade_declined) {
      return failed_precondition("pulsar " + where(endpoint_) + " refused the WebSocket: HTTP " +
                                 std::to_string(res.result_int()) + " " + res.body());
    }
    if (result) return lost(endpoint_, "WebSocket handshake", result);
    tcp_layer.expires_never();
    return ok_status();
  }

  Status write(std::string_view text, std::chrono::milliseconds timeout) override {
    if (broken_) return lost(endpoint_, "connection", error_);
    bool done = false;
    beast::error_code result;
    ws_.text(true);
    ws_.async_write(net::buffer(text.data(), text.size()), [&](beast::error_code ec, std::size_t) {
      done = true;
      result = ec;
    });
    if (!run_until(ioc_, [&] { return done; }, timeout)) {
      beast::get_lowest_layer(ws_).close();  // the write cannot be taken back: the connection goes
      run_until(ioc_, [&] { return done && !reading_; }, std::chrono::milliseconds(1000));
      broken_ = true;
      error_ = net::error::timed_out;
      return lost(endpoint_, "write", error_);
    }
    if (result) {
      broken_ = true;
      error_ = result;
      return lost(endpoint_, "write", result);
    }
    return ok_status();
  }

  StatusOr<bool> read(std::string* out, std::chrono::milliseconds timeout) override {
    if (!ready_ && !broken_ && !reading_) start_read();
    run_until(ioc_, [&] { return ready_ || broken_; }, timeout);
    if (ready_) {
      *out = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      ready_ = false;
      return true;
    }
    if (broken_) return lost(endpoint_, "read", error_);
    return false;
  }

  bool open() const override { return !broken_ && ws_.is_open(); }

  void close() override {
    if (!broken_ && ws_.is_open()) {
      bool done = false;
      ws_.async_close(websocket::close_code::normal, [&](beast::error_code) { done = true; });
      run_until(ioc_, [&] { return done; }, std::chrono::milliseconds(500));
    }
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    broken_ = true;
    // let the cancelled operations finish, so none refers to a gone frame
    run_until(ioc_, [&] { return !reading_; }, std::chrono::milliseconds(1000));
  }

 private:
  void start_read() {
    reading_ = true;
    ws_.async_read(buffer_, [this](beast::error_code ec, std::size_t) {
      reading_ = false;
      if (ec) {
        broken_ = true;
        error_ = ec;
      } else {
        ready_ = true;
      }
    });
  }

  Endpoint endpoint_;
  net::io_context ioc_;
  std::shared_ptr<net::ssl::context> ctx_;  // TLS: outlives ws_
  websocket::stream<Next> ws_;
  beast::flat_buffer buffer_;
  bool reading_ = false;  // an async_read is pending
  bool ready_ = false;    // a whole frame is in buffer_
  bool broken_ = false;   // the connection is lost
  beast::error_code error_;
};

template <class Next>
StatusOr<std::unique_ptr<Session>> connect_session(const Endpoint& e, std::shared_ptr<net::ssl::context> ctx,
                                                   const std::string& target, std::chrono::milliseconds timeout) {
  auto s = std::make_unique<WsSession<Next>>(e, std::move(ctx));
  if (Status st = s->connect(target, timeout); !st.ok()) return st;
  return std::unique_ptr<Session>(std::move(s));
}

// One request and its answer on a connected `stream`.
template <class Stream>
StatusOr<int> exchange(net::io_context& ioc, Stream& stream, const Endpoint& e, std::string_view method,
                       const std::string& target, const std::string& body, std::string* response) {
  http::request<http::string_body> req{http::string_to_verb({method.data(), method.size()}), target, 11};
  req.set(http::field::host, where(e));
  if (!e.token.empty()) req.set(http::field::authorization, "Bearer " + e.token);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code result;
  http::async_write(stream, req, [&](beast::error_code ec, std::size_t) {
    if (ec) {
      result = ec;
      return;
    }
    http::async_read(stream, buffer, res, [&](beast::error_code ec2, std::size_t) { result = ec2; });
  });
  run(ioc);
  beast::error_code ignored;
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (result) return lost(e, std::string(method) + " " + target.substr(0, target.find('?')), result);
  *response = std::move(res.body());
  return static_cast<int>(res.result_int());
}

}  // namespace

struct WebSocket::Impl {
  std::unique_ptr<Session> session;
};

WebSocket::WebSocket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebSocket::~WebSocket() = default;

StatusOr<std::unique_ptr<WebSocket>> WebSocket::connect(const Endpoint& e, const std::string& target,
                                                        std::chrono::milliseconds timeout) {
  auto ctx = tls_context(e);
  if (!ctx.ok()) return ctx.status();
  auto session = *ctx ? connect_session<TlsStream>(e, *ctx, target, timeout)
                      : connect_session<beast::tcp_stream>(e, nullptr, target, timeout);
  if (!session.ok()) return session.status();
  auto impl = std::make_unique<Impl>();
  impl->session = std::move(session).value();
  return std::unique_ptr<WebSocket>(new WebSocket(std::move(impl)));
}

Status WebSocket::write(std::string_view text, std::chrono::milliseconds timeout) {
  return impl_->session->write(text, timeout);
}

StatusOr<bool> WebSocket::read(std::string* out, std::chrono::milliseconds timeout) {
  return impl_->session->read(out, timeout);
}

bool WebSocket::open() const { return impl_->session->open(); }

void WebSocket::close() { impl_->session->close(); }

StatusOr<int> http_request(const Endpoint& e, std::string_view method, const std::string& target,
                           const std::string& body, std::string* response, std::chrono::milliseconds timeout) {
  auto ctx = tls_context(e);
  if (!ctx.ok()) return ctx.status();
  net::io_context ioc;
  if (*ctx) {
    TlsStream stream(ioc, **ctx);
    beast::get_lowest_layer(stream).expires_after(timeout);
    if (Status s = connect_stream(ioc, stream, e); !s.ok()) return s;
    return exchange(ioc, stream, e, method, target, body, response);
  }
  beast::tcp_stream stream(ioc);
  stream.expires_after(timeout);
  if (Status s = connect_stream(ioc, stream, e); !s.ok()) return s;
  return exchange(ioc, stream, e, method, target, body, response);
}

}  // namespace idem::pulsar::detail
