#include "pull_source.hpp"

#include <spdlog/logger.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace idem::nats::detail {
namespace {

constexpr std::size_t kMaxFetch = 1024;  // messages asked for in one pull request
constexpr Duration kMinExpires{50};      // the shortest pull request
constexpr Duration kFirstWait{2};        // a fetch with timeout 0 waits this long for a first reply
constexpr Duration kPullGrace{1000};     // beyond its expiry, a pull request without an end is given up

struct MetaDeleter {
  void operator()(jsMsgMetaData* m) const { jsMsgMetaData_Destroy(m); }
};

struct MsgDeleter {
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
};
using MsgPtr = std::unique_ptr<natsMsg, MsgDeleter>;

// A header value on one line (NATS headers cannot hold CR or LF).
std::string header_value(std::string_view v) {
  std::string s(v);
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n'; }, ' ');
  return s;
}

void copy_headers(natsMsg* m, Delivery& d) {
  const char** keys = nullptr;
  int n = 0;
  if (natsMsgHeader_Keys(m, &keys, &n) != NATS_OK) return;
  for (int i = 0; i < n; ++i) {
    const char* value = nullptr;
    if (natsMsgHeader_Get(m, keys[i], &value) == NATS_OK && value != nullptr) d.headers.emplace_back(keys[i], value);
  }
  free(keys);  // the array is the caller's; its strings are the message's
}

}  // namespace

PullSource::PullSource(Options o)
    : o_(std::move(o)),
      clock_(o_.clock ? o_.clock : system_clock()),
      log_(o_.logger.get()),
      keep_alive_every_(o_.lease / 3) {}

PullSource::~PullSource() { close(); }

std::string PullSource::describe() const {
  return "nats " + o_.host + ":" + std::to_string(o_.port) + " stream " + o_.stream + " durable " + o_.durable;
}

Status PullSource::start() {
  auto c = Connection::open(o_);
  if (!c.ok()) return c.status();
  conn_ = std::move(c).value();
  return subscribe();
}

Status PullSource::subscribe() {
  if (Status s = conn_->declare_stream(o_.stream, o_.subject); !s.ok()) return s;
  if (Status s = conn_->declare_stream(o_.dead_letter_stream, o_.dead_letter_subject); !s.ok()) return s;
  if (Status s = conn_->declare_consumer(o_); !s.ok()) return s;
  if (sub_ != nullptr) return ok_status();  // requests name the durable: they reach a re-created one
  natsInbox* inbox = nullptr;
  if (natsInbox_Create(&inbox) != NATS_OK) return internal_error("nats: out of memory");
  inbox_ = inbox;
  natsInbox_Destroy(inbox);
  next_subject_ = "$JS.API.CONSUMER.MSG.NEXT." + o_.stream + "." + o_.durable;
  const std::string replies = inbox_ + ".*";
  natsStatus s = natsConnection_SubscribeSync(&sub_, conn_->nc(), replies.c_str());
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub_, -1, -1);  // bounded by the requests' batches
  if (s != NATS_OK) return from_nats(s, "subscription for the pull replies of " + o_.stream + "/" + o_.durable);
  return ok_status();
}

Status PullSource::check_connected() {
  if (!conn_) return unavailable("nats: the source is closed");
  const bool up = conn_->connected();
  if (up != was_connected_ && log_ != nullptr) {
    if (up) {
      log_->info("idem: {} reconnected", describe());
    } else {
      log_->warn("idem: {} lost its connection; nats.c reconnects", describe());
    }
  }
  was_connected_ = up;
  return up ? ok_status() : unavailable("nats: not connected to " + conn_->where() + " (reconnecting)");
}

// One pull request at a time, answered on inbox_.<request number>, asking for what the
// caller may take and expiring after the caller's timeout (at least kMinExpires). The
// server sends what it has at once and the rest as it comes, so a request outlives the
// call that sent it; what it brings later is taken by the next fetch.
Status PullSource::fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  if (Status s = check_connected(); !s.ok()) return s;
  if (sub_ == nullptr || redeclare_) {
    if (Status s = subscribe(); !s.ok()) return s;
    redeclare_ = false;
  }
  const std::size_t want = std::clamp<std::size_t>(max, 1, kMaxFetch);
  const std::size_t before = out.size();
  auto got = [&] { return out.size() - before; };
  const TimePoint deadline = clock_->now() + timeout;
  if (pull_.open && clock_->now() > pull_.give_up_at) pull_.open = false;  // its end was lost
  bool waited = false;
  for (;;) {
    StatusOr<Read> r = read_one(Duration(0), out);  // what has arrived already
    if (!r.ok()) return r.status();
    if (*r == Read::kMessage && got() < want) continue;
    if (*r != Read::kNothing && got() == 0) continue;
    if (got() > 0 || waited) return ok_status();
    if (!pull_.open) {
      if (Status s = send_pull(want, std::max(timeout, kMinExpires)); !s.ok()) return s;
    }
    const Duration left = std::chrono::duration_cast<Duration>(deadline - clock_->now());
    r = read_one(std::max(left, kFirstWait), out);
    if (!r.ok()) return r.status();
    waited = *r == Read::kNothing || (*r == Read::kEnded && left <= kFirstWait);
  }
}

Status PullSource::send_pull(std::size_t batch, Duration expires) {
  ++pull_.number;
  pull_ = Pull{pull_.number, batch, true, clock_->now() + expires + kPullGrace};
  const std::string body =
      "{\"batch\":" + std::to_string(batch) + ",\"expires\":" + std::to_string(expires.count() * 1'000'000) + "}";
  const std::string reply = inbox_ + "." + std::to_string(pull_.number);
  const natsStatus s = natsConnection_PublishRequest(conn_->nc(), next_subject_.c_str(), reply.c_str(), body.data(),
                                                     static_cast<int>(body.size()));
  if (s != NATS_OK) {
    pull_.open = false;
    return from_nats(s, "pull request to " + o_.stream + "/" + o_.durable);
  }
  return ok_status();
}

// Reads one message from the subscription, waiting up to `wait`. A delivery goes to
// `out`; a status (408 expired, 409 …; sent to the request's reply subject) ends its
// request.
StatusOr<PullSource::Read> PullSource::read_one(Duration wait, std::vector<Delivery>& out) {
  natsMsg* raw = nullptr;
  const natsStatus s = natsSubscription_NextMsg(&raw, sub_, wait.count());
  if (s == NATS_TIMEOUT) return Read::kNothing;
  if (s != NATS_OK) return from_nats(s, "reading the pull replies of " + o_.stream + "/" + o_.durable);
  const char* subject = natsMsg_GetSubject(raw);
  const char* dot = std::strrchr(subject, '.');
  const std::uint64_t number = dot != nullptr ? std::strtoull(dot + 1, nullptr, 10) : 0;
  const char* status = nullptr;
  if (natsMsg_GetDataLength(raw) == 0 && natsMsgHeader_Get(raw, "Status", &status) == NATS_OK) {
    // 503 (no responders) or 409 (consumer deleted, …): declared again at the next fetch.
    if (status[0] == '5' || std::strncmp(status, "409", 3) == 0) redeclare_ = true;
    natsMsg_Destroy(raw);
    if (number != pull_.number) return Read::kStale;
    pull_.open = false;
    return Read::kEnded;
  }
  // Deliveries keep their own subject, so they are counted against the open request.
  if (pull_.open && --pull_.left == 0) pull_.open = false;  // fully answered
  take(raw, clock_->now(), out);
  return Read::kMessage;
}

void PullSource::take(natsMsg* raw, TimePoint now, std::vector<Delivery>& out) {
  MsgPtr m(raw);
  jsMsgMetaData* raw_meta = nullptr;
  if (natsMsg_GetMetaData(&raw_meta, m.get()) != NATS_OK) return;  // not a JetStream delivery
  std::unique_ptr<jsMsgMetaData, MetaDeleter> meta(raw_meta);
  const std::uint64_t seq = meta->Sequence.Stream;
  if (auto dup = by_seq_.find(seq); dup != by_seq_.end()) {
    // Redelivered while this runtime still holds it: the newer delivery replaces the
    // older (its reply subject is current) and is not handed out twice.
    if (auto f = in_flight_.find(dup->second); f != in_flight_.end()) {
      natsMsg_Destroy(f->second.msg);
      f->second.msg = m.release();
    }
    return;
  }
  Delivery d;
  const int len = natsMsg_GetDataLength(m.get());
  if (len > 0) d.body.assign(natsMsg_GetData(m.get()), static_cast<std::size_t>(len));
  d.broker_id = std::to_string(seq);
  d.position = seq;
  d.partition = o_.stream;
  d.delivery_count = static_cast<std::uint32_t>(std::min<std::uint64_t>(meta->NumDelivered, UINT32_MAX));
  d.received_at = now;
  d.handle = next_handle_++;
  copy_headers(m.get(), d);
  in_flight_.emplace(d.handle, InFlight{m.release(), seq, now});
  by_seq_.emplace(seq, d.handle);
  touches_.emplace_back(now, d.handle);
  out.push_back(std::move(d));
}

natsMsg* PullSource::release(const Delivery& d) {
  auto it = in_flight_.find(d.handle);
  if (it == in_flight_.end()) return nullptr;
  natsMsg* m = it->second.msg;
  by_seq_.erase(it->second.seq);
  in_flight_.erase(it);
  return m;
}

natsStatus PullSource::reply(natsMsg* m, const std::string& what) const {
  const char* to = natsMsg_GetReply(m);
  if (to == nullptr || conn_ == nullptr) return NATS_ILLEGAL_STATE;
  return natsConnection_Publish(conn_->nc(), to, what.data(), static_cast<int>(what.size()));
}

Status PullSource::settled(natsStatus s, natsMsg* m, const char* what) {
  natsMsg_Destroy(m);
  if (s == NATS_OK) return ok_status();
  return from_nats(s, std::string(what) + " on " + o_.stream + "/" + o_.durable);
}

Status PullSource::ack(const Delivery& d) {
  natsMsg* m = release(d);
  if (m == nullptr) return failed_precondition("nats: ack of a delivery this source does not hold");
  return settled(reply(m, "+ACK"), m, "Ack");
}

Status PullSource::retry(const Delivery& d, Duration delay) {
  natsMsg* m = release(d);
  if (m == nullptr) return failed_precondition("nats: retry of a delivery this source does not hold");
  const std::string nak =
      delay.count() > 0 ? "-NAK {\"delay\":" + std::to_string(delay.count() * 1'000'000) + "}" : std::string("-NAK");
  return settled(reply(m, nak), m, "Nak");
}

Status PullSource::dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) {
  natsMsg* m = release(d);
  if (m == nullptr) return failed_precondition("nats: dead_letter of a delivery this source does not hold");
  MsgPtr original(m);
  natsMsg* raw = nullptr;
  natsStatus s =
      natsMsg_Create(&raw, o_.dead_letter_subject.c_str(), nullptr, d.body.data(), static_cast<int>(d.body.size()));
  if (s != NATS_OK) return from_nats(s, "dead-letter message");
  MsgPtr letter(raw);
  const std::string msg_id = o_.stream + ":" + d.broker_id;
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"Idem-Reason", header_value(reason)},
                                    {"Idem-Detail", header_value(detail)},
                                    {"Idem-Stream", o_.stream},
                                    {"Idem-Stream-Seq", d.broker_id}}) {
    if (s == NATS_OK && !value.empty()) s = natsMsgHeader_Set(letter.get(), name, value.c_str());
  }
  if (s != NATS_OK) return from_nats(s, "dead-letter headers");
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = msg_id.c_str();
  jsPubAck* pa = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&pa, conn_->js(), letter.get(), &po, &code);
  jsPubAck_Destroy(pa);
  if (s != NATS_OK) return from_nats(s, "dead-letter publish to " + o_.dead_letter_subject, code);
  const natsStatus term = reply(original.get(), "+TERM");
  return settled(term, original.release(), "Term");
}

void PullSource::hold(const Delivery& d) { natsMsg_Destroy(release(d)); }

// Every delivery in flight for keep_alive_every_ since its receipt or its last
// InProgress gets one now. touches_ is in time order; entries of settled deliveries,
// or of ones touched again since, are dropped as they come up.
void PullSource::keep_alive() {
  if (touches_.empty()) return;
  const TimePoint now = clock_->now();
  while (!touches_.empty() && touches_.front().first + keep_alive_every_ <= now) {
    const auto [touched, handle] = touches_.front();
    touches_.pop_front();
    auto it = in_flight_.find(handle);
    if (it == in_flight_.end() || it->second.touched != touched) continue;
    (void)reply(it->second.msg, "+WPI");  // lost with the connection: AckWait decides
    it->second.touched = now;
    touches_.emplace_back(now, handle);
  }
}

StatusOr<bool> PullSource::drained() {
  if (Status s = check_connected(); !s.ok()) return s;
  jsConsumerInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetConsumerInfo(&info, conn_->js(), o_.stream.c_str(), o_.durable.c_str(), nullptr, &code);
  if (s != NATS_OK) return from_nats(s, "consumer info of " + o_.stream + "/" + o_.durable, code);
  const bool empty = info->NumAckPending == 0 && info->NumPending == 0;
  jsConsumerInfo_Destroy(info);
  return empty;
}

void PullSource::close() {
  for (auto& [handle, f] : in_flight_) natsMsg_Destroy(f.msg);  // left to the broker
  in_flight_.clear();
  by_seq_.clear();
  touches_.clear();
  if (sub_ != nullptr) {
    natsSubscription_Destroy(sub_);  // the durable stays
    sub_ = nullptr;
  }
  if (conn_ && conn_->connected()) (void)natsConnection_FlushTimeout(conn_->nc(), 1000);  // the last acks
  conn_.reset();
}

}  // namespace idem::nats::detail
