#include "queue_source.hpp"

#include <spdlog/logger.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace idem::rabbitmq::detail {
namespace {

constexpr std::size_t kCommitEvery = 256;       // acks and nacks per transaction at the most
constexpr std::size_t kHeldAcks = kCommitEvery / 2;  // acks kept back for a later `multiple`, at the most
constexpr std::size_t kMaxCommitsInFlight = 8;  // tx.commit sent and not answered, at the most
constexpr int kTagBits = 48;
constexpr std::uint64_t kTagMask = (std::uint64_t{1} << kTagBits) - 1;

timeval to_timeval(Duration d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// The delivery count from the quorum queue's header, else from the redelivered flag.
std::uint32_t delivery_count(const Headers& headers, bool redelivered) {
  for (const auto& [k, v] : headers) {
    if (k != "x-delivery-count") continue;
    std::uint32_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc{} && end == v.data() + v.size()) return n + 1;
  }
  return redelivered ? 2 : 1;
}

// d's headers without those the broker sets (x-death, x-delivery-count, …).
Headers own_headers(const Delivery& d) {
  Headers out;
  for (const auto& h : d.headers) {
    if (h.first.rfind("x-", 0) != 0) out.push_back(h);
  }
  return out;
}

}  // namespace

Duration retry_bucket(Duration delay) {
  Duration b = kMinRetryBucket;
  while (b < delay && b < kMaxRetryBucket) b *= 2;
  return b;
}

std::string retry_queue_name(const std::string& queue, Duration bucket) {
  return queue + ".retry." + std::to_string(bucket.count()) + "ms";
}

std::string dead_letter_queue_of(const Options& o) {
  return o.dead_letter_queue.empty() ? o.queue + ".dlq" : o.dead_letter_queue;
}

std::vector<std::string> queues_of(const Options& o) {
  std::vector<std::string> qs{o.queue, dead_letter_queue_of(o)};
  for (Duration b = kMinRetryBucket; b <= kMaxRetryBucket; b *= 2) qs.push_back(retry_queue_name(o.queue, b));
  return qs;
}

QueueSource::QueueSource(Options o)
    : o_(std::move(o)), clock_(o_.clock ? o_.clock : system_clock()), log_(o_.logger.get()) {
  o_.dead_letter_queue = dead_letter_queue_of(o_);
}

std::string QueueSource::describe() const {
  return "amqp " + o_.host + ":" + std::to_string(o_.port) + " vhost " + o_.vhost + " queue " + o_.queue;
}

Status QueueSource::start() { return connect(); }

Status QueueSource::connect() {
  conn_.reset();
  consuming_ = false;
  uncommitted_ = 0;
  commits_in_flight_ = 0;
  buffered_.clear();  // the broker requeues them with the old channel
  undecided_.clear();
  unsettled_.clear();
  acks_.clear();
  auto c = Connection::open(o_);
  if (!c.ok()) {
    if (was_connected_ && log_) log_->warn("idem: {} lost its connection: {}", describe(), c.status().to_string());
    return c.status();
  }
  conn_ = std::move(c).value();
  ++epoch_;
  if (Status s = declare_queues(); !s.ok()) {
    conn_.reset();
    return s;
  }
  amqp_tx_select(conn_->state(), kChannel);
  if (Status s = conn_->check("tx.select"); !s.ok()) {
    conn_.reset();
    return s;
  }
  if (was_connected_ && log_) log_->info("idem: {} reconnected", describe());
  was_connected_ = true;
  return ok_status();
}

// The work queue, the dead-letter queue and one retry queue per bucket, each expiring
// messages back to the work queue through the default exchange.
Status QueueSource::declare_queues() {
  if (Status s = conn_->declare_work_queue(o_); !s.ok()) return s;
  if (Status s = conn_->declare(o_.dead_letter_queue, false, amqp_empty_table); !s.ok()) return s;
  const std::string dlx_key = "x-dead-letter-exchange", dlrk_key = "x-dead-letter-routing-key", empty;
  amqp_table_entry_t entries[2]{};
  entries[0].key = bytes(dlx_key);
  entries[0].value.kind = AMQP_FIELD_KIND_UTF8;
  entries[0].value.value.bytes = bytes(empty);
  entries[1].key = bytes(dlrk_key);
  entries[1].value.kind = AMQP_FIELD_KIND_UTF8;
  entries[1].value.value.bytes = bytes(o_.queue);
  const amqp_table_t args{2, entries};
  for (Duration b = kMinRetryBucket; b <= kMaxRetryBucket; b *= 2) {
    if (Status s = conn_->declare(retry_queue_name(o_.queue, b), false, args); !s.ok()) return s;
  }
  return ok_status();
}

Status QueueSource::ready(std::size_t max) {
  if (!conn_ || conn_->broken()) {
    if (Status s = connect(); !s.ok()) return s;
  }
  if (!consuming_) return start_consuming(max);
  return ok_status();
}

Status QueueSource::start_consuming(std::size_t max) {
  if (prefetch_ == 0) {
    prefetch_ = o_.prefetch != 0 ? o_.prefetch : static_cast<std::uint16_t>(std::clamp<std::size_t>(max, 1, 65535));
  }
  amqp_basic_qos(conn_->state(), kChannel, 0, prefetch_, 0);
  if (Status s = conn_->check("basic.qos"); !s.ok()) return s;
  amqp_basic_consume(conn_->state(), kChannel, bytes(o_.queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  if (Status s = conn_->check("basic.consume " + o_.queue); !s.ok()) return s;
  consuming_ = true;
  return ok_status();
}

// Receives what the broker sent, waiting up to `timeout` for the first delivery. The
// acks and nacks decided meanwhile are committed by flush() (the broker counts
// uncommitted acks against the prefetch: the runtime flushes before a fetch that may
// wait or follows an empty one), or once kCommitEvery are waiting.
Status QueueSource::fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  if (Status s = ready(max); !s.ok()) return s;
  std::size_t got = 0;
  const TimePoint deadline = clock_->now() + timeout;
  while (got < max) {
    if (buffered_.empty()) {
      auto r = receive(Duration(0));
      if (r.ok() && !*r && got == 0)
        r = receive(std::max(Duration(0), std::chrono::duration_cast<Duration>(deadline - clock_->now())));
      if (!r.ok()) return got > 0 ? ok_status() : r.status();
      if (!*r) break;
      continue;
    }
    out.push_back(std::move(buffered_.front()));
    buffered_.pop_front();
    ++got;
  }
  return ok_status();
}

StatusOr<bool> QueueSource::receive(Duration timeout) {
  amqp_connection_state_t c = conn_->state();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  amqp_envelope_t env;
  amqp_rpc_reply_t r;
  while (true) {
    amqp_maybe_release_buffers(c);
    const auto left = std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
    timeval tv = to_timeval(std::max(Duration(0), left));
    r = amqp_consume_message(c, &env, &tv, 0);
    if (r.reply_type != AMQP_RESPONSE_LIBRARY_EXCEPTION || r.library_error != AMQP_STATUS_UNEXPECTED_STATE) break;
    if (Status s = handle_other_frame(); !s.ok()) return s;  // a commit-ok, or the end
  }
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) return false;
  if (Status s = conn_->check(r, "basic.consume"); !s.ok()) return s;
  Delivery d;
  d.body = to_string(env.message.body);
  d.broker_id = std::to_string(env.delivery_tag);
  d.partition = o_.queue;
  d.received_at = clock_->now();
  d.handle = (epoch_ << kTagBits) | (env.delivery_tag & kTagMask);
  const amqp_basic_properties_t& p = env.message.properties;
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) d.headers = table_to_headers(p.headers);
  d.delivery_count = delivery_count(d.headers, env.redelivered != 0);
  unsettled_.insert(env.delivery_tag);
  undecided_[d.handle] = (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? to_string(p.message_id) : std::string();
  amqp_destroy_envelope(&env);
  buffered_.push_back(std::move(d));
  return true;
}

// A frame other than a delivery: a commit-ok, or the broker closing the channel or the
// connection, or cancelling the consumer (the queue was deleted), each of which ends
// this connection.
Status QueueSource::handle_other_frame() {
  amqp_frame_t frame;
  timeval tv{0, 0};
  const int s = amqp_simple_wait_frame_noblock(conn_->state(), &frame, &tv);
  if (s == AMQP_STATUS_TIMEOUT) return ok_status();
  if (s != AMQP_STATUS_OK) return conn_->lost(s, "reading a frame");
  if (frame.frame_type != AMQP_FRAME_METHOD) return ok_status();
  const amqp_method_number_t id = frame.payload.method.id;
  if (id == AMQP_TX_COMMIT_OK_METHOD && commits_in_flight_ > 0) {
    --commits_in_flight_;
    return ok_status();
  }
  if (id == AMQP_CHANNEL_CLOSE_METHOD || id == AMQP_CONNECTION_CLOSE_METHOD) {
    amqp_rpc_reply_t r{};
    r.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION;
    r.reply = frame.payload.method;
    return conn_->check(r, "consuming " + o_.queue);
  }
  if (id == AMQP_BASIC_CANCEL_METHOD) {
    Status lost = unavailable("amqp: the broker cancelled the consumer of " + o_.queue + " on " + conn_->where());
    conn_.reset();
    return lost;
  }
  return ok_status();
}

StatusOr<std::uint64_t> QueueSource::tag_of(const Delivery& d, const char* what) {
  undecided_.erase(d.handle);
  if (!conn_ || conn_->broken() || (d.handle >> kTagBits) != epoch_) {
    return unavailable(std::string("amqp: ") + what + " of delivery " + d.broker_id +
                       ": its channel has closed; the broker redelivers it");
  }
  return d.handle & kTagMask;
}

// Sends one settling frame for `tag` (basic.ack or basic.nack with requeue).
Status QueueSource::settle(std::uint64_t tag, bool requeue) {
  unsettled_.erase(tag);
  const int s =
      requeue ? amqp_basic_nack(conn_->state(), kChannel, tag, 0, 1) : amqp_basic_ack(conn_->state(), kChannel, tag, 0);
  return conn_->lost(s, requeue ? "basic.nack" : "basic.ack");
}

// Acks wait here for the commit (flush(), send_acks()).
Status QueueSource::ack(const Delivery& d) {
  auto tag = tag_of(d, "ack");
  if (!tag.ok()) return tag.status();
  acks_.push_back(*tag);
  return ++uncommitted_ >= kCommitEvery ? flush() : ok_status();
}

// The acks below the lowest delivery still unsettled (undecided or held) go as one
// basic.ack with `multiple`. The rest (a worker that finished before one with lower
// tags) wait for that gap to close, so that a later commit folds them too, unless
// `all` or more than kHeldAcks are left: then they go one by one. A broker settles a
// `multiple` ack for about what one single ack costs it.
Status QueueSource::send_acks(bool all) {
  if (acks_.empty()) return ok_status();
  std::sort(acks_.begin(), acks_.end());
  std::size_t i = 0;
  auto pending = unsettled_.begin();
  while (i < acks_.size() && pending != unsettled_.end() && *pending == acks_[i]) {
    ++i;  // every unsettled tag so far is an ack waiting here
    ++pending;
  }
  if (i > 1) {
    const std::uint64_t upto = acks_[i - 1];
    unsettled_.erase(unsettled_.begin(), pending);
    if (Status s = conn_->lost(amqp_basic_ack(conn_->state(), kChannel, upto, 1), "basic.ack"); !s.ok()) return s;
  } else {
    i = 0;
  }
  if (!all && acks_.size() - i <= kHeldAcks) {
    acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(i));
    return ok_status();
  }
  for (; i < acks_.size(); ++i) {
    if (Status s = settle(acks_[i], false); !s.ok()) return s;
  }
  acks_.clear();
  return ok_status();
}

Status QueueSource::retry(const Delivery& d, Duration delay) {
  if (delay.count() > 0) {
    PublishProps props;
    props.expiration = std::to_string(delay.count());
    return move(d, retry_queue_name(o_.queue, retry_bucket(delay)), props);
  }
  auto tag = tag_of(d, "nack");
  if (!tag.ok()) return tag.status();
  if (Status s = settle(*tag, true); !s.ok()) return s;
  return ++uncommitted_ >= kCommitEvery ? flush() : ok_status();
}

Status QueueSource::dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) {
  const Headers extra{{"reason", std::string(reason)}, {"detail", std::string(detail)}};
  PublishProps props;
  props.extra_headers = &extra;
  return move(d, o_.dead_letter_queue, props);
}

Status QueueSource::move(const Delivery& d, const std::string& queue, const PublishProps& base) {
  auto id = undecided_.find(d.handle);
  PublishProps props = base;
  if (id != undecided_.end()) props.message_id = id->second;  // empty: none
  auto tag = tag_of(d, "publish");                            // forgets the message id
  if (!tag.ok()) return tag.status();
  const Headers own = own_headers(d);
  props.headers = &own;
  if (Status s = conn_->publish(queue, d.body, props); !s.ok()) return s;
  if (Status s = settle(*tag, false); !s.ok()) return s;
  ++uncommitted_;
  return commit(true);
}

Status QueueSource::flush() { return commit(false); }

// A tx.commit waits for the broker (about a millisecond on a durable queue), so the
// acks' commits are pipelined: the runtime goes on fetching while the broker commits.
// A retry's or dead letter's commit is awaited, so that its caller knows the publish
// and the ack took effect together.
Status QueueSource::commit(bool wait) {
  if (uncommitted_ == 0 && !wait) return ok_status();
  if (!conn_ || conn_->broken()) return unavailable("amqp: not connected to " + describe());
  if (uncommitted_ > 0) {
    if (Status s = send_acks(wait); !s.ok()) return s;
    if (uncommitted_ > acks_.size()) {  // something was sent
      amqp_tx_commit_t method{};
      const int sent = amqp_send_method(conn_->state(), kChannel, AMQP_TX_COMMIT_METHOD, &method);
      if (Status s = conn_->lost(sent, "tx.commit"); !s.ok()) return s;
      ++commits_in_flight_;
    }
    uncommitted_ = acks_.size();  // the acks kept back
  }
  return wait || commits_in_flight_ > kMaxCommitsInFlight ? await_commits() : ok_status();
}

// Reads until every commit in flight is answered; deliveries that come meanwhile are
// buffered for fetch().
Status QueueSource::await_commits() {
  const auto deadline = std::chrono::steady_clock::now() + o_.command_timeout;
  while (commits_in_flight_ > 0) {
    const auto left = std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
    if (left <= Duration(0)) {
      conn_.reset();
      return unavailable("amqp: no commit-ok from " + describe() + " in time; reconnecting");
    }
    if (auto r = receive(std::min(left, Duration(50))); !r.ok()) return r.status();
  }
  return ok_status();
}

StatusOr<bool> QueueSource::drained() {
  if (!buffered_.empty() || !undecided_.empty()) return false;
  if (Status s = ready(prefetch_ != 0 ? prefetch_ : 1); !s.ok()) return s;
  std::uint32_t ready_messages = 0;
  if (Status s = conn_->declare(o_.queue, true, amqp_empty_table, &ready_messages); !s.ok()) return s;
  if (ready_messages > 0) return false;
  for (Duration b = kMinRetryBucket; b <= kMaxRetryBucket; b *= 2) {
    if (Status s = conn_->declare(retry_queue_name(o_.queue, b), true, amqp_empty_table, &ready_messages); !s.ok()) {
      return s;
    }
    if (ready_messages > 0) return false;
  }
  // A delivery that arrived meanwhile (e.g. a retry just come back) is not lost.
  auto r = receive(Duration(0));
  if (!r.ok()) return r.status();
  return !*r;
}

void QueueSource::close() {
  if (conn_ && !conn_->broken()) (void)commit(true);
  conn_.reset();
  buffered_.clear();
  undecided_.clear();
}

}  // namespace idem::rabbitmq::detail
