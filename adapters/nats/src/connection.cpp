#include "connection.hpp"

#include <algorithm>

namespace idem::nats::detail {
namespace {

constexpr std::int64_t kFirstReconnectDelayMs = 50;
constexpr std::int64_t kMaxReconnectDelayMs = 2000;
constexpr std::int64_t kNanosPerMs = 1'000'000;

// Doubles from 50 ms to 2 s with each failed attempt (nats.c calls it from its own
// thread; it keeps no state).
int64_t reconnect_delay(natsConnection*, int attempts, void*) {
  std::int64_t d = kFirstReconnectDelayMs;
  for (int i = 1; i < attempts && d < kMaxReconnectDelayMs; ++i) d *= 2;
  return std::min(d, kMaxReconnectDelayMs);
}

bool unreachable(natsStatus s) {
  switch (s) {
    case NATS_IO_ERROR:
    case NATS_NO_SERVER:
    case NATS_STALE_CONNECTION:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_TIMEOUT:
    case NATS_SSL_ERROR:
      return true;
    default:
      return false;
  }
}

struct OptionsDeleter {
  void operator()(natsOptions* o) const { natsOptions_Destroy(o); }
};

// TLS as o.tls asks: the server verified against the CA (or the system's trust store)
// and the URI's host, unless insecure.
natsStatus set_tls(natsOptions* raw, const TlsOptions& t) {
  if (!t.enabled) return NATS_OK;
  natsStatus s = natsOptions_SetSecure(raw, true);
  if (s == NATS_OK && !t.ca_file.empty()) s = natsOptions_LoadCATrustedCertificates(raw, t.ca_file.c_str());
  if (s == NATS_OK && !t.cert_file.empty())
    s = natsOptions_LoadCertificatesChain(raw, t.cert_file.c_str(), t.key_file.c_str());
  if (s == NATS_OK && t.insecure) s = natsOptions_SkipServerVerification(raw, true);
  return s;
}

// The one way of authenticating that o gives, if any.
natsStatus set_authentication(natsOptions* raw, const Options& o) {
  if (!o.user.empty()) return natsOptions_SetUserInfo(raw, o.user.c_str(), o.password.c_str());
  if (!o.token.empty()) return natsOptions_SetToken(raw, o.token.c_str());
  if (!o.nkey.empty()) return natsOptions_SetNKeyFromSeed(raw, o.nkey.c_str(), o.nkey_seed_file.c_str());
  if (!o.credentials_file.empty())
    return natsOptions_SetUserCredentialsFromFiles(raw, o.credentials_file.c_str(), nullptr);
  return NATS_OK;
}

}  // namespace

Status from_nats(natsStatus s, std::string_view what, jsErrCode code) {
  std::string text = "nats: " + std::string(what) + ": " + natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  if (detail != nullptr && *detail != '\0' && text.find(detail) == std::string::npos)
    text += " (" + std::string(detail) + ")";
  if (code != 0) text += " [JetStream error " + std::to_string(static_cast<int>(code)) + "]";
  return unreachable(s) ? unavailable(std::move(text)) : failed_precondition(std::move(text));
}

StatusOr<std::unique_ptr<Connection>> Connection::open(const Options& o, std::int64_t max_pending_publishes,
                                                       jsPubAckErrHandler on_error, void* closure) {
  std::unique_ptr<Connection> c(new Connection());
  c->where_ = o.host + ":" + std::to_string(o.port);
  natsOptions* raw = nullptr;
  if (natsOptions_Create(&raw) != NATS_OK) return internal_error("nats: out of memory");
  std::unique_ptr<natsOptions, OptionsDeleter> opts(raw);
  const std::string url = "nats://" + c->where_;  // credentials go through the options only
  natsStatus s = natsOptions_SetURL(raw, url.c_str());
  if (s == NATS_OK) s = set_authentication(raw, o);
  if (s == NATS_OK) s = set_tls(raw, o.tls);
  if (s == NATS_OK) s = natsOptions_SetTimeout(raw, o.connect_timeout.count());
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(raw, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(raw, -1);
  if (s == NATS_OK) s = natsOptions_SetCustomReconnectDelay(raw, reconnect_delay, nullptr);
  if (s == NATS_OK) s = natsOptions_SetName(raw, "idem");
  if (s != NATS_OK) return failed_precondition(from_nats(s, "options").message());
  s = natsConnection_Connect(&c->nc_, raw);
  if (s != NATS_OK) {
    Status e = from_nats(s, "cannot connect to " + c->where_);
    if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED || s == NATS_SSL_ERROR ||
        s == NATS_SECURE_CONNECTION_REQUIRED || s == NATS_SECURE_CONNECTION_WANTED)
      return failed_precondition(e.message());
    return e;
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = o.request_timeout.count();
  jo.PublishAsync.MaxPending = max_pending_publishes;
  jo.PublishAsync.ErrHandler = on_error;
  jo.PublishAsync.ErrHandlerClosure = closure;
  jo.PublishAsync.StallWait = o.request_timeout.count();  // a full window waits for acks, not 200 ms
  s = natsConnection_JetStream(&c->js_, c->nc_, &jo);
  if (s != NATS_OK) return from_nats(s, "JetStream context");
  return c;
}

Connection::~Connection() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    natsConnection_Destroy(nc_);
  }
}

bool Connection::connected() const { return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED; }

Status Connection::declare_stream(const std::string& name, const std::string& subject) const {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js_, name.c_str(), nullptr, &code);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(info);
    return ok_status();
  }
  if (s != NATS_NOT_FOUND && code != JSStreamNotFoundErr) return from_nats(s, "stream info of " + name, code);
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = name.c_str();
  const char* subjects[] = {subject.c_str()};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  code = static_cast<jsErrCode>(0);
  s = js_AddStream(&info, js_, &cfg, nullptr, &code);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(info);
    return ok_status();
  }
  if (code == JSStreamNameExistErr) return ok_status();  // another process made it meanwhile
  Status e = from_nats(s, "cannot create stream " + name + " for subject " + subject, code);
  return code != 0 ? failed_precondition(e.message()) : e;
}

Status Connection::remove_stream(const std::string& name) const {
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_DeleteStream(js_, name.c_str(), nullptr, &code);
  if (s == NATS_OK || s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) return ok_status();
  return from_nats(s, "cannot delete stream " + name, code);
}

Status Connection::declare_consumer(const Options& o) const {
  jsConsumerInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const std::int64_t ack_wait = o.lease.count() * kNanosPerMs;
  natsStatus s = js_GetConsumerInfo(&info, js_, o.stream.c_str(), o.durable.c_str(), nullptr, &code);
  bool exists = s == NATS_OK;
  if (exists) {
    const bool same = info->Config != nullptr && info->Config->AckWait == ack_wait &&
                      info->Config->MaxAckPending == o.max_ack_pending;
    jsConsumerInfo_Destroy(info);
    info = nullptr;
    if (same) return ok_status();
  } else if (s != NATS_NOT_FOUND && code != JSConsumerNotFoundErr) {
    return from_nats(s, "consumer info of " + o.stream + "/" + o.durable, code);
  }
  jsConsumerConfig cfg;
  jsConsumerConfig_Init(&cfg);
  cfg.Durable = o.durable.c_str();
  cfg.DeliverPolicy = js_DeliverAll;
  cfg.AckPolicy = js_AckExplicit;
  cfg.AckWait = ack_wait;
  cfg.MaxAckPending = o.max_ack_pending;
  cfg.FilterSubject = o.subject.c_str();
  code = static_cast<jsErrCode>(0);
  s = exists ? js_UpdateConsumer(&info, js_, o.stream.c_str(), &cfg, nullptr, &code)
             : js_AddConsumer(&info, js_, o.stream.c_str(), &cfg, nullptr, &code);
  if (s == NATS_OK) {
    jsConsumerInfo_Destroy(info);
    return ok_status();
  }
  Status e = from_nats(s,
                       std::string(exists ? "cannot update" : "cannot create") + " durable consumer " + o.durable +
                           " on stream " + o.stream,
                       code);
  return code != 0 ? failed_precondition(e.message()) : e;
}

}  // namespace idem::nats::detail
