#include "kafka_source.hpp"

#include <spdlog/logger.h>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace idem::kafka::detail {
namespace {

constexpr Duration kCommitEvery{100};    // async commits of the decided prefix, at most this often
constexpr int kSyncTimeoutMs = 10'000;   // committed-offset and watermark queries
constexpr int kMaxDrainPolls = 100'000;  // polls that serve callbacks before a close
constexpr std::int64_t kRedeliverAfterMs = 1'000;  // a held or unforwarded delivery comes back

constexpr const char* kDue = "idem-due-ms";
constexpr const char* kReason = "idem-reason";
constexpr const char* kDetail = "idem-detail";
constexpr const char* kOrigin = "idem-origin";

// librdkafka before 2.3.0 (Debian 12 ships 2.0.2) asserts in
// rd_kafka_sticky_assignor_state_destroy when a consumer using the cooperative-sticky
// assignor is destroyed between joining its group and its first assignment; there the
// group rebalances eagerly (every partition revoked, then assigned again).
const char* assignor() {
  return rd_kafka_version() >= 0x020300ff ? "cooperative-sticky" : "range,roundrobin";
}

std::string name_of(const std::string& topic, std::int32_t partition) {
  return topic + "/" + std::to_string(partition);
}

std::string header(const Delivery& d, std::string_view name) {
  for (const auto& [n, v] : d.headers)
    if (n == name) return v;
  return {};
}

std::int64_t due_of(const Delivery& d) {
  const std::string v = header(d, kDue);
  std::int64_t due = 0;
  std::from_chars(v.data(), v.data() + v.size(), due);  // malformed: 0, due now
  return due;
}

void read_headers(const rd_kafka_message_t* m, Delivery& d) {
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  const char* name;
  const void* value;
  std::size_t size;
  for (std::size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
    d.headers.emplace_back(name, value ? std::string(static_cast<const char*>(value), size) : std::string());
  }
}

}  // namespace

KafkaSource::KafkaSource(Options o)
    : o_(std::move(o)), clock_(o_.clock ? o_.clock : system_clock()), log_(o_.logger.get()) {
  fill_default_names(o_);
  ctx_.log = log_;
  ctx_.rebalance = &KafkaSource::on_rebalance;
  ctx_.self = this;
}

KafkaSource::~KafkaSource() { close(); }

std::string KafkaSource::describe() const { return "kafka " + broker_list(o_) + "/" + o_.topic + " group " + o_.group; }

bool KafkaSource::cooperative() const {
  return std::string_view(rd_kafka_rebalance_protocol(consumer_.get())) == "COOPERATIVE";
}

void fill_default_names(Options& o) {
  if (o.retry_topic.empty()) o.retry_topic = o.topic + ".retry";
  if (o.dead_letter_topic.empty()) o.dead_letter_topic = o.topic + ".dlq";
}

std::int64_t KafkaSource::now_ms() const { return to_unix_ms(clock_->now()); }

Status KafkaSource::start() {
  const auto session = std::to_string(o_.session_timeout.count());
  const auto heartbeat = std::to_string(std::max<std::int64_t>(100, o_.session_timeout.count() / 4));
  auto consumer = make_handle(RD_KAFKA_CONSUMER, o_, &ctx_,
                              {{"group.id", o_.group},
                               {"enable.auto.commit", "false"},
                               {"enable.auto.offset.store", "false"},
                               {"auto.offset.reset", "earliest"},
                               {"session.timeout.ms", session},
                               {"heartbeat.interval.ms", heartbeat},
                               {"partition.assignment.strategy", assignor()}});
  // librdkafka's own prefetch (queued.min.messages 100,000) is kept: Kafka deliveries
  // do not time out in a client's queue, and librdkafka 2.0 refills a queue that fell
  // below a smaller mark only now and then (1,000 held the source to about 22,000
  // msgs/s on topics written in small batches).
  if (!consumer.ok()) return consumer.status();
  consumer_ = std::move(consumer).value();
  auto producer = make_handle(RD_KAFKA_PRODUCER, o_, &ctx_, {{"enable.idempotence", "true"}, {"linger.ms", "0"}});
  if (!producer.ok()) return producer.status();
  producer_ = std::move(producer).value();
  if (Status s = check_reachable(producer_.get(), o_); !s.ok()) return s;
  if (Status s = ensure_topics(producer_.get(), o_, {o_.topic, o_.retry_topic, o_.dead_letter_topic}); !s.ok()) {
    return s;
  }
  rd_kafka_poll_set_consumer(consumer_.get());
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(2);
  rd_kafka_topic_partition_list_add(topics, o_.topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_topic_partition_list_add(topics, o_.retry_topic.c_str(), RD_KAFKA_PARTITION_UA);
  const rd_kafka_resp_err_t e = rd_kafka_subscribe(consumer_.get(), topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return failed_precondition("kafka: cannot subscribe to " + o_.topic + ": " + rd_kafka_err2str(e));
  }
  return ok_status();
}

// --- rebalance ---------------------------------------------------------------------

void KafkaSource::on_rebalance(void* self, rd_kafka_t* rk, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t* parts) {
  auto* s = static_cast<KafkaSource*>(self);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    s->assign(parts);
  } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    s->revoke(parts);
  } else {
    if (s->log_) s->log_->warn("idem kafka: rebalance failed: {}", rd_kafka_err2str(err));
    s->revoke(nullptr);
  }
  (void)rk;
}

void KafkaSource::assign(rd_kafka_topic_partition_list_t* parts) {
  std::vector<std::string> names;
  for (int i = 0; i < parts->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = parts->elems[i];
    Partition p;
    p.topic = tp.topic;
    p.id = tp.partition;
    p.is_retry = p.topic == o_.retry_topic;
    names.push_back(name_of(p.topic, p.id));
    parts_[names.back()] = std::move(p);
  }
  if (cooperative()) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_assign(consumer_.get(), parts)) {
      if (log_) log_->warn("idem kafka: incremental assign: {}", rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    }
  } else {
    rd_kafka_assign(consumer_.get(), parts);
  }
  assigned_ = true;
  if (retries_paused_) {  // the new retry partitions start paused like the others
    retries_paused_ = false;
    pause_or_resume_retries();
  }
  if (listener_ != nullptr) listener_->on_assigned(names);
}

// The runtime settles every delivery of the partitions (on_revoked returns once it
// has), their decided prefix is committed, then they are given up. parts == null:
// every partition (a failed rebalance).
void KafkaSource::revoke(rd_kafka_topic_partition_list_t* parts) {
  std::vector<std::string> names;
  for (int i = 0; parts != nullptr && i < parts->cnt; ++i) {
    const std::string n = name_of(parts->elems[i].topic, parts->elems[i].partition);
    if (parts_.count(n) > 0) names.push_back(n);
  }
  if (parts == nullptr) {
    for (const auto& [n, p] : parts_) names.push_back(n);
  }
  auto revoked = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  if (listener_ != nullptr && !names.empty()) listener_->on_revoked(names);
  if (filling_ != nullptr) {  // polled by this fetch, not yet handed to the runtime
    filling_->erase(std::remove_if(filling_->begin() + static_cast<std::ptrdiff_t>(filling_from_), filling_->end(),
                                   [&](const Delivery& d) { return revoked(d.partition); }),
                    filling_->end());
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    it = revoked(it->second.partition) ? waiting_.erase(it) : std::next(it);
  }
  if (!names.empty()) {
    if (Status s = commit(true, names); !s.ok() && log_) log_->warn("idem kafka: {}", s.to_string());
  }
  for (const std::string& n : names) parts_.erase(n);
  assigned_ = false;  // until the rebalance's assign
  if (parts != nullptr && cooperative()) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(consumer_.get(), parts)) {
      if (log_) log_->warn("idem kafka: incremental unassign: {}", rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    }
  } else {
    rd_kafka_assign(consumer_.get(), nullptr);  // eager: every partition goes
    parts_.clear();
  }
}

// --- fetch -------------------------------------------------------------------------

Status KafkaSource::fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  if (closed_) return failed_precondition("kafka: the source is closed");
  if (clock_->now() >= next_commit_) {
    (void)commit(false);
    next_commit_ = clock_->now() + kCommitEvery;
  }
  const std::size_t released = release_due(max, out);
  if (released >= max) return ok_status();
  Duration wait = released > 0 ? Duration(0) : timeout;
  if (!waiting_.empty()) wait = std::clamp(Duration(waiting_.begin()->first - now_ms()), Duration(0), wait);
  filling_ = &out;
  filling_from_ = out.size() - released;
  Status s = poll_some(max - released, wait, out);
  filling_ = nullptr;
  pause_or_resume_retries();
  return s;
}

Status KafkaSource::poll_some(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  const std::size_t before = out.size();
  poll_error_ = ok_status();
  for (std::size_t polls = 0; out.size() - before < max && polls < max; ++polls) {
    const int wait_ms = polls == 0 ? static_cast<int>(timeout.count()) : 0;
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_.get(), wait_ms);
    if (m == nullptr) break;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      take(m, out);
    } else if (m->err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || m->err == RD_KAFKA_RESP_ERR__TRANSPORT) {
      poll_error_ = unavailable(std::string("kafka: ") + rd_kafka_message_errstr(m));
    } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && log_) {
      log_->warn("idem kafka: {}: {}", describe(), rd_kafka_message_errstr(m));
    }
    rd_kafka_message_destroy(m);
  }
  return out.size() > before ? ok_status() : poll_error_;
}

void KafkaSource::take(const rd_kafka_message_t* m, std::vector<Delivery>& out) {
  const std::string topic = rd_kafka_topic_name(m->rkt);
  const std::string name = name_of(topic, m->partition);
  auto it = parts_.find(name);
  if (it == parts_.end() || !it->second.tracker.add(m->offset)) return;  // not ours, or seen already
  Partition& p = it->second;
  Delivery d;
  if (m->payload != nullptr) d.body.assign(static_cast<const char*>(m->payload), m->len);
  d.broker_id = name + "@" + std::to_string(m->offset);
  d.position = static_cast<std::uint64_t>(m->offset) + 1;  // offsets count from 0; position 0 is "none"
  d.partition = name;
  d.delivery_count = 0;  // Kafka keeps none
  d.received_at = clock_->now();
  d.handle = static_cast<std::uint64_t>(m->offset);
  read_headers(m, d);
  if (m->key != nullptr && m->key_len > 0) p.keys[m->offset].assign(static_cast<const char*>(m->key), m->key_len);
  if (p.is_retry) {
    const std::int64_t due = due_of(d);
    if (due > now_ms()) {
      waiting_.emplace(due, std::move(d));
      return;
    }
  }
  out.push_back(std::move(d));
}

std::size_t KafkaSource::release_due(std::size_t max, std::vector<Delivery>& out) {
  const std::int64_t now = now_ms();
  std::size_t n = 0;
  while (n < max && !waiting_.empty() && waiting_.begin()->first <= now) {
    Delivery d = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    d.received_at = clock_->now();
    out.push_back(std::move(d));
    ++n;
  }
  return n;
}

// Holding retry-topic messages costs memory: beyond max_waiting, the retry topic's
// partitions are paused until half of them have been handed out.
void KafkaSource::pause_or_resume_retries() {
  const bool pause = waiting_.size() >= o_.max_waiting;
  const bool resume = retries_paused_ && waiting_.size() <= o_.max_waiting / 2;
  if (!(pause && !retries_paused_) && !resume) return;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(parts_.size()));
  for (const auto& [name, p] : parts_)
    if (p.is_retry) rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.id);
  if (resume) {
    rd_kafka_resume_partitions(consumer_.get(), list);
    retries_paused_ = false;
  } else {
    rd_kafka_pause_partitions(consumer_.get(), list);
    retries_paused_ = true;
  }
  rd_kafka_topic_partition_list_destroy(list);
}

// --- decisions ---------------------------------------------------------------------

KafkaSource::Partition* KafkaSource::partition_of(const Delivery& d) {
  auto it = parts_.find(d.partition);
  return it == parts_.end() ? nullptr : &it->second;
}

void KafkaSource::decided(Partition& p, const Delivery& d) {
  const auto offset = static_cast<std::int64_t>(d.handle);
  p.tracker.done(offset);
  p.keys.erase(offset);
}

Status KafkaSource::ack(const Delivery& d) {
  if (Partition* p = partition_of(d)) decided(*p, d);
  return ok_status();
}

Status KafkaSource::forward(const Delivery& d, const std::string& topic, Headers extra, bool origin_key) {
  Partition* p = partition_of(d);
  if (p == nullptr) return ok_status();  // given up: its next owner reads it again
  Headers headers;
  std::string origin = d.broker_id;
  for (const auto& [name, value] : d.headers) {
    if (name == kOrigin) origin = value;  // a retried message keeps its first origin
    if (name == kDue || name == kReason || name == kDetail || name == kOrigin) continue;
    headers.emplace_back(name, value);
  }
  headers.insert(headers.end(), extra.begin(), extra.end());
  headers.emplace_back(kOrigin, origin);
  auto key = p->keys.find(static_cast<std::int64_t>(d.handle));
  const std::string& k = origin_key ? origin : key == p->keys.end() ? std::string() : key->second;
  Status s = produce_and_wait(producer_.get(), o_, topic, k, d.body, headers);
  if (!s.ok()) {  // undecided until it comes back; the partition's commit stays below it
    hold(d);
    return s;
  }
  p = partition_of(d);    // (producing served no rebalance, but look again all the same)
  if (p != nullptr) decided(*p, d);
  return ok_status();
}

// Kafka hands a message out once per assignment: left undecided, it would come back
// only after a rebalance or a restart, and its partition's commit would wait for it
// until then. So the source hands it out again itself, as other brokers redeliver.
void KafkaSource::hold(const Delivery& d) {
  if (partition_of(d) != nullptr) waiting_.emplace(now_ms() + kRedeliverAfterMs, d);
}

Status KafkaSource::retry(const Delivery& d, Duration delay) {
  return forward(d, o_.retry_topic, {{kDue, std::to_string(now_ms() + std::max<std::int64_t>(0, delay.count()))}});
}

Status KafkaSource::dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) {
  return forward(d, o_.dead_letter_topic, {{kReason, std::string(reason)}, {kDetail, std::string(detail)}},
                 /*origin_key=*/true);
}

// --- commits, drained, close ---------------------------------------------------------

Status KafkaSource::commit(bool sync, const std::vector<std::string>& only) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(static_cast<int>(parts_.size()));
  std::vector<std::pair<Partition*, std::int64_t>> moved;
  for (auto& [name, p] : parts_) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    if (auto at = p.tracker.to_commit(sync)) {
      rd_kafka_topic_partition_list_add(list, p.topic.c_str(), p.id)->offset = *at;
      moved.emplace_back(&p, *at);
    }
  }
  rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (!moved.empty()) e = rd_kafka_commit(consumer_.get(), list, sync ? 0 : 1);
  rd_kafka_topic_partition_list_destroy(list);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR__NO_OFFSET) {
    return unavailable(std::string("kafka: offset commit failed: ") + rd_kafka_err2str(e));
  }
  for (auto& [p, at] : moved) {
    if (sync) {
      p->tracker.committed(at);
    } else {
      p->tracker.sent(at);  // its outcome comes unseen: the next synchronous commit makes it again
    }
  }
  return ok_status();
}

// Drained when this member has its assignment (none while a rebalance is under way:
// its partitions may be about to change), holds nothing undecided or waiting, and the
// group's committed offset of every partition of the topic and its retry topic is its
// high watermark. Every partition, not only this member's: one another member still
// works on comes here if that member leaves, so a member whose own partitions are done
// (or that has none yet, in a cooperative rebalance's first round) is not drained.
StatusOr<bool> KafkaSource::drained() {
  if (!assigned_ || !waiting_.empty()) return false;
  for (const auto& [name, p] : parts_)
    if (p.tracker.undecided() > 0) return false;
  if (Status s = commit(true); !s.ok()) return s;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(8);
  StatusOr<bool> at_end = true;
  for (const std::string& topic : {o_.topic, o_.retry_topic}) {
    StatusOr<int> n = partition_count(consumer_.get(), o_, topic);
    if (!n.ok()) {
      at_end = n.status();
      break;
    }
    for (int p = 0; p < *n; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  }
  if (at_end.ok()) at_end = group_at_end(list);
  rd_kafka_topic_partition_list_destroy(list);
  return at_end;
}

// Whether the group's committed offset of each partition in `list` is its high
// watermark (or the partition is empty).
StatusOr<bool> KafkaSource::group_at_end(rd_kafka_topic_partition_list_t* list) {
  rd_kafka_resp_err_t e = rd_kafka_committed(consumer_.get(), list, kSyncTimeoutMs);
  bool all = e == RD_KAFKA_RESP_ERR_NO_ERROR;
  for (int i = 0; all && i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    std::int64_t low = 0, high = 0;
    e = rd_kafka_query_watermark_offsets(consumer_.get(), tp.topic, tp.partition, &low, &high, kSyncTimeoutMs);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) break;
    // A partition whose offset the coordinator could not read is not known to be done.
    all = high == low || (tp.err == RD_KAFKA_RESP_ERR_NO_ERROR && tp.offset == high);
  }
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(std::string("kafka: drained: ") + rd_kafka_err2str(e));
  return all;
}

void KafkaSource::close() {
  if (closed_ || !consumer_) return;
  closed_ = true;
  if (Status s = commit(true); !s.ok() && log_) log_->warn("idem kafka: {}", s.to_string());
  listener_ = nullptr;
  leave_group();
  // Closed above, or given up on: destroying must not wait for the group again.
  rd_kafka_destroy_flags(consumer_.release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  if (producer_) rd_kafka_flush(producer_.get(), static_cast<int>(o_.command_timeout.count()));
  producer_.reset();
}

// Leaves the group (its revoke commits again), waiting at most command_timeout:
// rd_kafka_consumer_close() can wait without end for a rebalance in progress.
void KafkaSource::leave_group() {
  rd_kafka_t* rk = consumer_.get();
  // A rebalance delivered before the close must be answered first (the group cannot
  // terminate while it waits for an assign call). Messages polled here are dropped:
  // they were never handed out, so their offsets are not committed.
  for (int i = 0; i < kMaxDrainPolls; ++i) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 0);
    if (m == nullptr) break;
    rd_kafka_message_destroy(m);
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  if (rd_kafka_error_t* e = rd_kafka_consumer_close_queue(rk, q)) {
    if (log_) log_->warn("idem kafka: close: {}", rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    rd_kafka_queue_destroy(q);
    return;
  }
  const TimePoint deadline = clock_->now() + o_.command_timeout;
  while (!rd_kafka_consumer_closed(rk) && clock_->now() < deadline) {
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 100);
    if (ev == nullptr) continue;
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE) {
      on_rebalance(this, rk, rd_kafka_event_error(ev), rd_kafka_event_topic_partition_list(ev));
    }
    rd_kafka_event_destroy(ev);
  }
  if (!rd_kafka_consumer_closed(rk) && log_) log_->warn("idem kafka: {} did not leave its group in time", describe());
  rd_kafka_queue_destroy(q);
}

}  // namespace idem::kafka::detail
