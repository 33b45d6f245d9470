#include "connection.hpp"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/time.h>

#include <cinttypes>
#include <cstring>

namespace idem::rabbitmq::detail {
namespace {

constexpr int kFrameMax = 131072;

timeval to_timeval(Duration d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::string close_text(std::uint16_t code, amqp_bytes_t text) { return std::to_string(code) + " " + to_string(text); }

amqp_table_entry_t string_entry(const std::string& key, const std::string& value) {
  amqp_table_entry_t e{};
  e.key = bytes(key);
  e.value.kind = AMQP_FIELD_KIND_UTF8;
  e.value.value.bytes = bytes(value);
  return e;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A TLS socket as o.tls asks. rabbitmq-c checks a host name against DNS names only and
// loads no CA by itself, so the name (or IP address) goes to OpenSSL's own check on
// the socket's context, and without tls_ca the context gets the system's trust store.
StatusOr<amqp_socket_t*> tls_socket(amqp_connection_state_t c, const Options& o, const std::string& where) {
  const TlsOptions& t = o.tls;
  amqp_socket_t* socket = amqp_ssl_socket_new(c);
  if (socket == nullptr) return unavailable("amqp: cannot connect to " + where + ": no TLS socket");
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  const auto refuse = [&](const std::string& what) { return invalid_argument("amqp: " + what + " for " + where); };
  if (!t.ca_file.empty() && amqp_ssl_socket_set_cacert(socket, t.ca_file.c_str()) != AMQP_STATUS_OK)
    return refuse("cannot load tls_ca");
  if (t.ca_file.empty() && SSL_CTX_set_default_verify_paths(ctx) != 1) return refuse("cannot load the system's CAs");
  // Always a password (maybe empty): without one OpenSSL asks the terminal for it.
  amqp_ssl_socket_set_key_passwd(socket, t.key_password.c_str());
  if (!t.cert_file.empty() &&
      amqp_ssl_socket_set_key(socket, t.cert_file.c_str(), t.key_file.c_str()) != AMQP_STATUS_OK)
    return refuse("cannot load tls_cert and tls_key (or the key's password is wrong)");
  amqp_ssl_socket_set_verify_peer(socket, t.insecure ? 0 : 1);
  amqp_ssl_socket_set_verify_hostname(socket, 0);  // OpenSSL checks it, below
  if (!t.insecure) {
    X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
    const int set = is_ip_address(o.host) ? X509_VERIFY_PARAM_set1_ip_asc(param, o.host.c_str())
                                          : X509_VERIFY_PARAM_set1_host(param, o.host.c_str(), 0);
    if (set != 1) return refuse("cannot check the server's name");
  }
  return socket;
}

}  // namespace

amqp_bytes_t bytes(const std::string& s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = const_cast<char*>(s.data());
  return b;
}

std::string to_string(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

Headers table_to_headers(const amqp_table_t& t) {
  Headers out;
  for (int i = 0; i < t.num_entries; ++i) {
    const amqp_table_entry_t& e = t.entries[i];
    const amqp_field_value_t& v = e.value;
    std::string value;
    switch (v.kind) {
      case AMQP_FIELD_KIND_UTF8:
      case AMQP_FIELD_KIND_BYTES:
        value = to_string(v.value.bytes);
        break;
      case AMQP_FIELD_KIND_BOOLEAN:
        value = v.value.boolean ? "true" : "false";
        break;
      case AMQP_FIELD_KIND_I8:
        value = std::to_string(v.value.i8);
        break;
      case AMQP_FIELD_KIND_U8:
        value = std::to_string(v.value.u8);
        break;
      case AMQP_FIELD_KIND_I16:
        value = std::to_string(v.value.i16);
        break;
      case AMQP_FIELD_KIND_U16:
        value = std::to_string(v.value.u16);
        break;
      case AMQP_FIELD_KIND_I32:
        value = std::to_string(v.value.i32);
        break;
      case AMQP_FIELD_KIND_U32:
        value = std::to_string(v.value.u32);
        break;
      case AMQP_FIELD_KIND_I64:
        value = std::to_string(v.value.i64);
        break;
      case AMQP_FIELD_KIND_U64:
      case AMQP_FIELD_KIND_TIMESTAMP:
        value = std::to_string(v.value.u64);
        break;
      default:
        continue;  // arrays, tables, floats, decimals: not text
    }
    out.emplace_back(to_string(e.key), std::move(value));
  }
  return out;
}

StatusOr<std::unique_ptr<Connection>> Connection::open(const Options& o) {
  const std::string where = o.host + ":" + std::to_string(o.port) + " vhost " + o.vhost;
  amqp_connection_state_t c = amqp_new_connection();
  if (c == nullptr) return unavailable("amqp: cannot connect to " + where + ": out of memory");
  std::unique_ptr<Connection> conn(new Connection(c, where));
  conn->broken_ = true;  // until logged in: the destructor must not send close
  amqp_socket_t* socket = nullptr;
  if (o.tls.enabled) {
    auto s = tls_socket(c, o, where);
    if (!s.ok()) return s.status();
    socket = *s;
  } else {
    socket = amqp_tcp_socket_new(c);
  }
  if (socket == nullptr) return unavailable("amqp: cannot connect to " + where + ": no socket");
  timeval tv = to_timeval(o.connect_timeout);
  if (int s = amqp_socket_open_noblock(socket, o.host.c_str(), o.port, &tv); s != AMQP_STATUS_OK) {
    const std::string why = "amqp: cannot connect to " + where + ": " + amqp_error_string2(s);
    // A handshake the certificate failed is a refusal, not an outage.
    if (s == AMQP_STATUS_SSL_ERROR || s == AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED ||
        s == AMQP_STATUS_SSL_PEER_VERIFY_FAILED || s == AMQP_STATUS_SSL_CONNECTION_FAILED)
      return failed_precondition(why);
    return unavailable(why);
  }
  if (Status s = conn->login(o); !s.ok()) return s;
  conn->broken_ = false;
  timeval rpc = to_timeval(o.command_timeout);
  amqp_set_rpc_timeout(c, &rpc);
  if (Status s = conn->open_channel(); !s.ok()) return s;
  return conn;
}

Status Connection::login(const Options& o) {
  timeval tv = to_timeval(o.connect_timeout);
  amqp_set_handshake_timeout(conn_, &tv);
  amqp_set_rpc_timeout(conn_, &tv);
  // EXTERNAL's response (an identity) is not read by RabbitMQ, which takes the user from
  // the certificate; rabbitmq-c refuses an empty one.
  const amqp_rpc_reply_t r = o.external_auth ? amqp_login(conn_, o.vhost.c_str(), 0, kFrameMax, 0,
                                                         AMQP_SASL_METHOD_EXTERNAL, "idem")
                                              : amqp_login(conn_, o.vhost.c_str(), 0, kFrameMax, 0,
                                                           AMQP_SASL_METHOD_PLAIN, o.user.c_str(), o.password.c_str());
  const std::string who = "amqp: " + where_ + " refused the login of " +
                          (o.external_auth ? std::string("the client certificate (EXTERNAL)")
                                           : "user \"" + o.user + "\"") +
                          ": ";
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return ok_status();
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        return failed_precondition(who + close_text(m->reply_code, m->reply_text));
      }
      return failed_precondition(who + amqp_method_name(r.reply.id));
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      // The broker closes the socket on a refused login (bad credentials, no access).
      if (r.library_error == AMQP_STATUS_CONNECTION_CLOSED || r.library_error == AMQP_STATUS_SOCKET_CLOSED) {
        return failed_precondition(who + "connection closed (wrong user or password, or no access to the vhost)");
      }
      return unavailable("amqp: login to " + where_ + " failed: " + amqp_error_string2(r.library_error));
    default:
      return unavailable("amqp: login to " + where_ + " failed");
  }
}

Status Connection::open_channel() {
  amqp_channel_open(conn_, kChannel);
  return check("channel.open");
}

Connection::~Connection() {
  if (!broken_) {
    amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(conn_);
}

Status Connection::check(const std::string& what) { return check(amqp_get_rpc_reply(conn_), what); }

Status Connection::check(const amqp_rpc_reply_t& r, const std::string& what) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return ok_status();
  broken_ = true;
  const std::string head = "amqp: " + what + " on " + where_ + ": ";
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) return unavailable(head + amqp_error_string2(r.library_error));
  if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) return unavailable(head + "no reply");
  if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    const auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
    amqp_connection_close_ok_t ok{};
    amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    const std::string text = close_text(m->reply_code, m->reply_text);
    return m->reply_code == AMQP_CONNECTION_FORCED ? unavailable(head + text) : failed_precondition(head + text);
  }
  if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    const auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
    amqp_channel_close_ok_t ok{};
    amqp_send_method(conn_, kChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    const std::string text = close_text(m->reply_code, m->reply_text);
    if (m->reply_code == AMQP_NOT_FOUND) return not_found(head + text);
    return failed_precondition(head + text);
  }
  return unavailable(head + "unexpected " + amqp_method_name(r.reply.id));
}

Status Connection::lost(int status, const std::string& what) {
  if (status == AMQP_STATUS_OK) return ok_status();
  broken_ = true;
  return unavailable("amqp: " + what + " on " + where_ + ": " + amqp_error_string2(status));
}

Status Connection::declare(const std::string& queue, bool passive, const amqp_table_t& args, std::uint32_t* ready) {
  if (broken_) return unavailable("amqp: the connection to " + where_ + " is broken");
  const amqp_queue_declare_ok_t* ok = amqp_queue_declare(conn_, kChannel, bytes(queue), passive, 1, 0, 0, args);
  Status s = check("queue.declare " + queue);
  if (s.code() == StatusCode::kNotFound && passive) {
    broken_ = false;  // only the channel was closed: open another
    if (Status c = open_channel(); !c.ok()) return c;
    return s;
  }
  if (!s.ok()) return s;
  if (ready != nullptr) *ready = ok->message_count;
  return ok_status();
}

Status Connection::remove(const std::string& queue) {
  if (broken_) return unavailable("amqp: the connection to " + where_ + " is broken");
  amqp_queue_delete(conn_, kChannel, bytes(queue), 0, 0);
  Status s = check("queue.delete " + queue);
  if (s.code() != StatusCode::kNotFound) return s;
  broken_ = false;  // only the channel was closed (an older broker's answer to an absent queue)
  return open_channel();
}

Status Connection::declare_work_queue(const Options& o) {
  Status s = declare(o.queue, true, amqp_empty_table);
  if (s.code() != StatusCode::kNotFound) return s;
  std::vector<amqp_table_entry_t> entries;
  const std::string type_key = "x-queue-type";
  if (o.queue_type != "classic") entries.push_back(string_entry(type_key, o.queue_type));
  amqp_table_t args{static_cast<int>(entries.size()), entries.data()};
  return declare(o.queue, false, args);
}

Status Connection::publish(const std::string& queue, const std::string& body, const PublishProps& p) {
  if (broken_) return unavailable("amqp: the connection to " + where_ + " is broken");
  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = 2;  // persistent
  if (!p.message_id.empty()) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = bytes(p.message_id);
  }
  if (!p.expiration.empty()) {
    props._flags |= AMQP_BASIC_EXPIRATION_FLAG;
    props.expiration = bytes(p.expiration);
  }
  std::vector<amqp_table_entry_t> entries;
  for (const Headers* h : {p.headers, p.extra_headers}) {
    if (h == nullptr) continue;
    for (const auto& [k, v] : *h) entries.push_back(string_entry(k, v));
  }
  if (!entries.empty()) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  }
  const int s = amqp_basic_publish(conn_, kChannel, amqp_empty_bytes, bytes(queue), 0, 0, &props, bytes(body));
  return lost(s, "basic.publish to " + queue);
}

}  // namespace idem::rabbitmq::detail
