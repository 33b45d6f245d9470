#include "stream_source.hpp"

#include <hiredict/hiredict.h>
#include <spdlog/logger.h>
#include <unistd.h>

#include <algorithm>
#include <random>

namespace idem::redis_streams::detail {
namespace {

constexpr Duration kNoBlock{0};
constexpr std::size_t kAckBatch = 512;  // acks sent in one XACK at the most

std::string default_consumer_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return std::string(host[0] ? host : "host") + "-" + std::to_string(getpid()) + "-" + suffix;
}

std::string text(const redictReply* r) {
  if (r == nullptr || (r->type != REDICT_REPLY_STRING && r->type != REDICT_REPLY_STATUS)) return {};
  return std::string(r->str, r->len);
}

bool is_array(const redictReply* r) { return r != nullptr && r->type == REDICT_REPLY_ARRAY; }

Status from_error(const std::string& what, const redictReply* r) {
  return unavailable("redis-stream: " + what + ": " + error_text(r));
}

}  // namespace

std::string dead_letter_stream_of(const Options& o) {
  return o.dead_letter_stream.empty() ? o.stream + ":dlq" : o.dead_letter_stream;
}

StreamSource::StreamSource(Options o)
    : o_(std::move(o)), clock_(o_.clock ? o_.clock : system_clock()), log_(o_.logger.get()) {
  if (o_.consumer.empty()) o_.consumer = default_consumer_name();
  o_.dead_letter_stream = dead_letter_stream_of(o_);
}

std::string StreamSource::describe() const {
  return "redis-stream " + o_.host + ":" + std::to_string(o_.port) + "/" + o_.stream + " group " + o_.group +
         " consumer " + o_.consumer;
}

Status StreamSource::start() {
  if (Status s = connect(); !s.ok()) return s;
  return create_group();
}

Status StreamSource::connect() {
  auto c = Connection::open(o_);
  if (!c.ok()) {
    if (was_connected_ && log_) log_->warn("idem: {} lost its connection: {}", describe(), c.status().to_string());
    return c.status();
  }
  if (was_connected_ && log_ && !conn_) log_->info("idem: {} reconnected", describe());
  conn_ = std::move(c).value();
  was_connected_ = true;
  return ok_status();
}

Status StreamSource::create_group() {
  auto r = conn_->call({"XGROUP", "CREATE", o_.stream, o_.group, "0", "MKSTREAM"}, o_.command_timeout);
  if (!r.ok()) return r.status();
  const std::string e = error_text(r->get());
  if (e.empty() || e.rfind("BUSYGROUP", 0) == 0) return ok_status();
  return failed_precondition("redis-stream: cannot create group " + o_.group + " on " + o_.stream + ": " + e);
}

template <class Send>
StatusOr<ReplyPtr> StreamSource::call_with(Send send, Duration timeout) {
  if (!conn_ || conn_->broken()) {
    conn_.reset();
    if (Status s = connect(); !s.ok()) return s;
    if (Status s = create_group(); !s.ok()) return s;
  }
  StatusOr<ReplyPtr> r = send(*conn_, timeout);
  if (r.ok() && error_text(r->get()).rfind("NOGROUP", 0) == 0) {
    // The server lost the group (restarted without persistence): make it again.
    if (Status s = create_group(); !s.ok()) return s;
    r = send(*conn_, timeout);
  }
  return r;
}

StatusOr<ReplyPtr> StreamSource::call(const std::vector<std::string>& argv, Duration block) {
  return call_with([&](Connection& c, Duration t) { return c.call(argv, t); }, block + o_.command_timeout);
}

StatusOr<ReplyPtr> StreamSource::call_encoded(const std::string& command) {
  return call_with([&](Connection& c, Duration t) { return c.call_encoded(command, t); }, o_.command_timeout);
}

Status StreamSource::fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  const std::size_t before = out.size();
  if (!history_done_) {
    if (Status s = read_history(max, out); !s.ok() || out.size() > before) return s;
  }
  if (Status s = claim_due_retries(max, out); !s.ok()) return s;
  if (clock_->now() >= next_autoclaim_ && out.size() - before < max) {
    if (Status s = autoclaim(max - (out.size() - before), out); !s.ok()) return s;
    next_autoclaim_ = clock_->now() + o_.claim_every;
  }
  const std::size_t got = out.size() - before;
  if (got >= max) return ok_status();
  return read_new(max - got, got > 0 ? kNoBlock : timeout, out);
}

// This consumer's own pending entries from an earlier run under the same name.
Status StreamSource::read_history(std::size_t max, std::vector<Delivery>& out) {
  auto r = call({"XREADGROUP", "GROUP", o_.group, o_.consumer, "COUNT", std::to_string(max), "STREAMS", o_.stream,
                 history_cursor_});
  if (!r.ok()) return r.status();
  const redictReply* rep = r->get();
  if (!error_text(rep).empty()) return from_error("XREADGROUP", rep);
  if (!is_array(rep) || rep->elements == 0 || !is_array(rep->element[0]) || rep->element[0]->elements < 2 ||
      rep->element[0]->element[1]->elements == 0) {
    history_done_ = true;
    return ok_status();
  }
  const redictReply* entries = rep->element[0]->element[1];
  history_cursor_ = text(entries->element[entries->elements - 1]->element[0]);
  const std::size_t from = out.size();
  take_entries(entries, false, out);
  return fill_delivery_counts(out, from);
}

Status StreamSource::read_new(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  std::vector<std::string> argv{"XREADGROUP", "GROUP", o_.group, o_.consumer, "COUNT", std::to_string(max)};
  if (timeout.count() > 0) {
    argv.push_back("BLOCK");
    argv.push_back(std::to_string(timeout.count()));
  }
  argv.insert(argv.end(), {"STREAMS", o_.stream, ">"});
  auto r = call(argv, timeout);
  if (!r.ok()) return r.status();
  const redictReply* rep = r->get();
  if (!error_text(rep).empty()) return from_error("XREADGROUP", rep);
  if (!is_array(rep) || rep->elements == 0 || !is_array(rep->element[0]) || rep->element[0]->elements < 2) {
    return ok_status();  // nil: nothing came in time
  }
  take_entries(rep->element[0]->element[1], true, out);
  return ok_status();
}

Status StreamSource::claim_due_retries(std::size_t max, std::vector<Delivery>& out) {
  const TimePoint now = clock_->now();
  std::vector<std::vector<std::string>> cmds;
  while (!retries_.empty() && retries_.begin()->first <= now && cmds.size() < max) {
    const Retry& r = retries_.begin()->second;
    // min-idle = the delay: an entry another consumer has claimed since is not taken.
    cmds.push_back({"XCLAIM", o_.stream, o_.group, o_.consumer, std::to_string(r.delay.count()), r.id});
    retries_.erase(retries_.begin());
  }
  if (cmds.empty()) return ok_status();
  if (!conn_ || conn_->broken()) return unavailable("redis-stream: not connected");
  auto replies = conn_->pipeline(cmds, o_.command_timeout);
  if (!replies.ok()) return replies.status();
  const std::size_t from = out.size();
  for (const ReplyPtr& r : *replies) {
    if (is_array(r.get())) take_entries(r.get(), false, out);
  }
  return fill_delivery_counts(out, from);
}

// Entries idle for longer than the lease on any consumer (one that died or stopped).
Status StreamSource::autoclaim(std::size_t max, std::vector<Delivery>& out) {
  auto r = call({"XAUTOCLAIM", o_.stream, o_.group, o_.consumer, std::to_string(o_.lease.count()), autoclaim_cursor_,
                 "COUNT", std::to_string(max)});
  if (!r.ok()) return r.status();
  const redictReply* rep = r->get();
  if (!error_text(rep).empty()) return from_error("XAUTOCLAIM", rep);
  if (!is_array(rep) || rep->elements < 2) return ok_status();
  autoclaim_cursor_ = text(rep->element[0]);
  if (autoclaim_cursor_.empty()) autoclaim_cursor_ = "0-0";
  const std::size_t from = out.size();
  take_entries(rep->element[1], false, out);
  if (rep->elements >= 3 && is_array(rep->element[2])) {  // deleted entries (trimmed): clear them
    for (std::size_t i = 0; i < rep->element[2]->elements; ++i) (void)ack_id(text(rep->element[2]->element[i]));
  }
  return fill_delivery_counts(out, from);
}

std::size_t StreamSource::take_entries(const redictReply* entries, bool counted, std::vector<Delivery>& out) {
  std::size_t added = 0;
  const TimePoint now = clock_->now();
  for (std::size_t i = 0; i < entries->elements; ++i) {
    const redictReply* e = entries->element[i];
    if (!is_array(e) || e->elements < 1) continue;  // XCLAIM's nil: the entry was deleted
    std::string id = text(e->element[0]);
    if (e->elements < 2 || !is_array(e->element[1])) {  // pending, but trimmed from the stream
      (void)ack_id(id);
      continue;
    }
    if (!in_flight_.emplace(id, now).second) continue;  // already with this runtime
    if (!counted) forget_retry(id);               // a claimed entry may have been scheduled here
    Delivery d;
    d.broker_id = std::move(id);
    d.partition = o_.stream;
    d.received_at = now;
    d.delivery_count = counted ? 1 : 0;
    const redictReply* fields = e->element[1];
    for (std::size_t f = 0; f + 1 < fields->elements; f += 2) {
      std::string name = text(fields->element[f]);
      if (name == "body") {
        d.body = text(fields->element[f + 1]);
      } else {
        d.headers.emplace_back(std::move(name), text(fields->element[f + 1]));
      }
    }
    out.push_back(std::move(d));
    ++added;
  }
  return added;
}

void StreamSource::forget_retry(const std::string& id) {
  for (auto it = retries_.begin(); it != retries_.end(); ++it) {
    if (it->second.id == id) {
      retries_.erase(it);
      return;
    }
  }
}

// Reads each delivery's count from the group's pending entries list.
Status StreamSource::fill_delivery_counts(std::vector<Delivery>& out, std::size_t from) {
  if (from >= out.size()) return ok_status();
  std::vector<std::vector<std::string>> cmds;
  for (std::size_t i = from; i < out.size(); ++i) {
    cmds.push_back({"XPENDING", o_.stream, o_.group, out[i].broker_id, out[i].broker_id, "1"});
  }
  auto replies = conn_->pipeline(cmds, o_.command_timeout);
  if (!replies.ok()) return replies.status();
  for (std::size_t i = 0; i < replies->size(); ++i) {
    const redictReply* r = (*replies)[i].get();
    if (is_array(r) && r->elements == 1 && is_array(r->element[0]) && r->element[0]->elements >= 4) {
      out[from + i].delivery_count = static_cast<std::uint32_t>(r->element[0]->element[3]->integer);
    }
  }
  return ok_status();
}

Status StreamSource::ack_id(const std::string& id) {
  auto r = call({"XACK", o_.stream, o_.group, id});
  if (!r.ok()) return r.status();
  if (!error_text(r->get()).empty()) return from_error("XACK", r->get());
  return ok_status();
}

// Acks are collected and sent as one XACK at the next flush() (or close(), or once
// kAckBatch are waiting): one round trip for many. An ack lost to a crash
// before it was sent leaves the entry pending; its redelivery is a duplicate.
// The ids are kept encoded, so that an XACK of many costs no formatting per id.
Status StreamSource::ack(const Delivery& d) {
  in_flight_.erase(d.broker_id);
  encode_bulk(acks_, d.broker_id);
  return ++ack_count_ >= kAckBatch ? flush() : ok_status();
}

Status StreamSource::flush() {
  if (ack_count_ == 0) return ok_status();
  std::string command = "*" + std::to_string(3 + ack_count_) + "\r\n";
  command.reserve(command.size() + 64 + o_.stream.size() + o_.group.size() + acks_.size());
  for (std::string_view arg : {std::string_view("XACK"), std::string_view(o_.stream), std::string_view(o_.group)})
    encode_bulk(command, arg);
  command += acks_;
  auto r = call_encoded(command);
  if (!r.ok()) return r.status();  // kept: sent again with the next flush
  acks_.clear();
  ack_count_ = 0;
  if (!error_text(r->get()).empty()) return from_error("XACK", r->get());
  return ok_status();
}

void StreamSource::close() {
  if (conn_ && !conn_->broken()) (void)flush();
  conn_.reset();
}

// Every delivery in flight for a third of the lease since its receipt or its last
// touch is claimed again by this consumer in one XCLAIM … JUSTID: its idle time starts
// over and its delivery count stays, so no consumer of the group claims it from a
// handler that is still running. A failed XCLAIM leaves it to the lease, as without.
void StreamSource::keep_alive() {
  const TimePoint now = clock_->now();
  if (in_flight_.empty() || now < next_touch_) return;
  const Duration every = std::max(Duration(10), o_.lease / 3);
  next_touch_ = now + every / 4;
  std::vector<std::string> argv{"XCLAIM", o_.stream, o_.group, o_.consumer, "0"};
  for (auto& [id, touched] : in_flight_) {
    if (touched + every > now) continue;
    argv.push_back(id);
    touched = now;
  }
  if (argv.size() == 5) return;
  argv.push_back("JUSTID");
  (void)call(argv);
}

Status StreamSource::retry(const Delivery& d, Duration delay) {
  in_flight_.erase(d.broker_id);
  retries_.emplace(clock_->now() + delay, Retry{d.broker_id, delay});
  return ok_status();
}

// XADD to the dead-letter stream, then XACK, in one script: atomic like MULTI/EXEC,
// but a failed XADD (the key holds another type, the server is out of memory) stops
// the script before the XACK, where MULTI/EXEC would run the XACK anyway and lose the
// message. Only while the entry is pending for this consumer: once another consumer
// has claimed it (this one was cut off past the lease, and its command ran late) or
// settled it, that one forwards it, so writing it here too would leave a second copy.
// KEYS: stream, dead-letter stream; ARGV: group, id, body, reason, detail, consumer.
constexpr const char* kDeadLetterScript =
    "if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1, ARGV[6]) == 0 then return 0 end "
    "redis.call('XADD', KEYS[2], '*', 'body', ARGV[3], 'reason', ARGV[4], 'detail', ARGV[5], 'id', ARGV[2]) "
    "return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])";

Status StreamSource::dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) {
  in_flight_.erase(d.broker_id);
  auto r = call({"EVAL", kDeadLetterScript, "2", o_.stream, o_.dead_letter_stream, o_.group, d.broker_id, d.body,
                 std::string(reason), std::string(detail), o_.consumer});
  if (!r.ok()) return r.status();
  if (!error_text(r->get()).empty()) return from_error("dead-letter XADD and XACK", r->get());
  return ok_status();
}

StatusOr<bool> StreamSource::drained() {
  if (!retries_.empty()) return false;
  auto r = call({"XPENDING", o_.stream, o_.group});
  if (!r.ok()) return r.status();
  const redictReply* rep = r->get();
  if (!is_array(rep) || rep->elements < 1) return from_error("XPENDING", rep);
  return rep->element[0]->integer == 0;
}

}  // namespace idem::redis_streams::detail
