#include "web.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace idem::pulsar::detail {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

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

// Resolves and connects `stream` to e within its expiry.
template <class Stream>
beast::error_code connect_tcp(net::io_context& ioc, Stream& stream, const Endpoint& e) {
  tcp::resolver resolver(ioc);
  beast::error_code result = net::error::would_block;
  resolver.async_resolve(e.host, std::to_string(e.port), [&](beast::error_code ec, tcp::resolver::results_type r) {
    if (ec) {
      result = ec;
      return;
    }
    stream.async_connect(r, [&](beast::error_code ec2, const tcp::endpoint&) { result = ec2; });
  });
  ioc.restart();
  ioc.run();
  return result;
}

}  // namespace

struct WebSocket::Impl {
  Endpoint endpoint;
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  bool reading = false;  // an async_read is pending
  bool ready = false;    // a whole frame is in buffer
  bool broken = false;   // the connection is lost
  beast::error_code error;

  void start_read() {
    reading = true;
    ws.async_read(buffer, [this](beast::error_code ec, std::size_t) {
      reading = false;
      if (ec) {
        broken = true;
        error = ec;
      } else {
        ready = true;
      }
    });
  }
};

WebSocket::WebSocket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebSocket::~WebSocket() { close(); }

StatusOr<std::unique_ptr<WebSocket>> WebSocket::connect(const Endpoint& e, const std::string& target,
                                                        std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->endpoint = e;
  auto& tcp_layer = beast::get_lowest_layer(impl->ws);
  tcp_layer.expires_after(timeout);
  if (auto ec = connect_tcp(impl->ioc, tcp_layer, e); ec) return lost(e, "connect", ec);
  beast::error_code ignored;
  tcp_layer.socket().set_option(tcp::no_delay(true), ignored);  // acks and permits are small frames
  impl->ws.set_option(websocket::stream_base::decorator([token = e.token](websocket::request_type& req) {
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  }));
  websocket::response_type res;
  beast::error_code result = net::error::would_block;
  impl->ws.async_handshake(res, e.host + ":" + std::to_string(e.port), target,
                           [&](beast::error_code ec) { result = ec; });
  impl->ioc.restart();
  impl->ioc.run();
  if (result == websocket::error::upgrade_declined) {
    return failed_precondition("pulsar " + where(e) + " refused the WebSocket: HTTP " +
                               std::to_string(res.result_int()) + " " + res.body());
  }
  if (result) return lost(e, "WebSocket handshake", result);
  tcp_layer.expires_never();
  return std::unique_ptr<WebSocket>(new WebSocket(std::move(impl)));
}

Status WebSocket::write(std::string_view text, std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (s.broken) return lost(s.endpoint, "connection", s.error);
  bool done = false;
  beast::error_code result;
  s.ws.text(true);
  s.ws.async_write(net::buffer(text.data(), text.size()), [&](beast::error_code ec, std::size_t) {
    done = true;
    result = ec;
  });
  if (!run_until(s.ioc, [&] { return done; }, timeout)) {
    beast::get_lowest_layer(s.ws).close();  // the write cannot be taken back: the connection goes
    run_until(s.ioc, [&] { return done && !s.reading; }, std::chrono::milliseconds(1000));
    s.broken = true;
    s.error = net::error::timed_out;
    return lost(s.endpoint, "write", s.error);
  }
  if (result) {
    s.broken = true;
    s.error = result;
    return lost(s.endpoint, "write", result);
  }
  return ok_status();
}

StatusOr<bool> WebSocket::read(std::string* out, std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (!s.ready && !s.broken && !s.reading) s.start_read();
  run_until(s.ioc, [&] { return s.ready || s.broken; }, timeout);
  if (s.ready) {
    *out = beast::buffers_to_string(s.buffer.data());
    s.buffer.consume(s.buffer.size());
    s.ready = false;
    return true;
  }
  if (s.broken) return lost(s.endpoint, "read", s.error);
  return false;
}

bool WebSocket::open() const { return !impl_->broken && impl_->ws.is_open(); }

void WebSocket::close() {
  Impl& s = *impl_;
  if (!s.broken && s.ws.is_open()) {
    bool done = false;
    s.ws.async_close(websocket::close_code::normal, [&](beast::error_code) { done = true; });
    run_until(s.ioc, [&] { return done; }, std::chrono::milliseconds(500));
  }
  beast::error_code ignored;
  beast::get_lowest_layer(s.ws).socket().close(ignored);
  s.broken = true;
  // let the cancelled operations finish, so none refers to a gone frame
  run_until(s.ioc, [&] { return !s.reading; }, std::chrono::milliseconds(1000));
}

StatusOr<int> http_request(const Endpoint& e, std::string_view method, const std::string& target,
                           const std::string& body, std::string* response, std::chrono::milliseconds timeout) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(timeout);
  if (auto ec = connect_tcp(ioc, stream, e); ec) return lost(e, "connect", ec);
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
  ioc.restart();
  ioc.run();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (result) return lost(e, std::string(method) + " " + target.substr(0, target.find('?')), result);
  *response = std::move(res.body());
  return static_cast<int>(res.result_int());
}

}  // namespace idem::pulsar::detail
