// Outgoing ids, the header codec and the dispatcher of the transactional outbox
// (outbox.hpp, dispatcher.hpp; docs/design.md §10).
#include <chrono>
#include <cstring>

#include "dispatcher.hpp"

namespace idem {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool get_bytes(std::string_view& in, std::string& out) {
  if (in.size() < 4) return false;
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(4);
  if (in.size() < n) return false;
  out.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}

}  // namespace

std::string outgoing_id(std::string_view incoming_id, std::uint32_t position) {
  std::string out;
  out.reserve(incoming_id.size() + 11);
  out.append(incoming_id);
  out.push_back('#');
  out.append(std::to_string(position));
  return out;
}

std::string encode_headers(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  for (const auto& [name, value] : headers) {
    put_u32(out, static_cast<std::uint32_t>(name.size()));
    out.append(name);
    put_u32(out, static_cast<std::uint32_t>(value.size()));
    out.append(value);
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> decode_headers(std::string_view bytes) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!bytes.empty()) {
    std::pair<std::string, std::string> h;
    if (!get_bytes(bytes, h.first) || !get_bytes(bytes, h.second)) return std::nullopt;
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace idem

namespace idem::detail {

StatusOr<std::unique_ptr<Publisher>> Dispatcher::take(const std::string& destination) {
  {
    std::lock_guard lock(pool_mu_);
    auto it = idle_.find(destination);
    if (it != idle_.end() && !it->second.empty()) {
      std::unique_ptr<Publisher> p = std::move(it->second.back());
      it->second.pop_back();
      return p;
    }
  }
  auto p = o_.publishers(destination);
  if (p.ok() && *p == nullptr) return internal_error("the publisher factory returned null for " + destination);
  return p;
}

void Dispatcher::give_back(const std::string& destination, std::unique_ptr<Publisher> p) {
  std::lock_guard lock(pool_mu_);
  idle_[destination].push_back(std::move(p));
}

Status Dispatcher::publish(const std::string& destination, std::span<const OutboxEntry* const> entries,
                           std::vector<OutboxEntry>& sent) {
  auto p = take(destination);
  if (!p.ok()) return p.status();
  std::vector<OutgoingMessage> batch;
  for (std::size_t i = 0; i < entries.size(); i += o_.dispatch_batch) {
    const std::size_t n = std::min(o_.dispatch_batch, entries.size() - i);
    batch.clear();
    for (std::size_t k = i; k < i + n; ++k) batch.push_back(entries[k]->message);
    if (Status s = (*p)->publish(batch); !s.ok()) return s;  // the publisher is dropped
    for (std::size_t k = i; k < i + n; ++k) sent.push_back(*entries[k]);
  }
  give_back(destination, std::move(p).value());
  return ok_status();
}

Status Dispatcher::send(std::span<const OutboxEntry> entries) {
  if (entries.empty()) return ok_status();
  // Each destination's entries, in order; most handlers publish to one.
  std::map<std::string_view, std::vector<const OutboxEntry*>> by_destination;
  for (const OutboxEntry& e : entries) by_destination[e.destination].push_back(&e);
  std::vector<OutboxEntry> sent;
  sent.reserve(entries.size());
  Status first = ok_status();
  for (const auto& [destination, list] : by_destination) {
    Status s = publish(list.front()->destination, list, sent);
    if (!s.ok()) {
      log_warn(log_, "idem: outbox: publishing to {} failed (resent later): {}", printable(destination), s.to_string());
      if (first.ok()) first = s;
    }
  }
  if (sent.empty()) return first;
  std::lock_guard lock(marks_mu_);
  for (OutboxEntry& e : sent) to_mark_.push_back(std::move(e));
  return first;
}

Status Dispatcher::flush_marks(TimePoint now) {
  std::vector<OutboxEntry> marks;
  {
    std::lock_guard lock(marks_mu_);
    if (to_mark_.empty()) return ok_status();
    marks.swap(to_mark_);
  }
  Status m = store_.outbox()->outbox_mark_sent(marks, now, ttl_);
  if (!m.ok())
    log_warn(log_, "idem: outbox: marking {} sent messages failed (they will be sent again): {}", marks.size(),
             m.to_string());
  return m;
}

StatusOr<std::vector<OutboxEntry>> Dispatcher::pending_of(std::string_view incoming_id) {
  OutboxQuery q;
  q.incoming_id = incoming_id;
  q.max = static_cast<std::size_t>(UINT32_MAX);
  return store_.outbox()->outbox_pending(q);
}

Status Dispatcher::send_pending_of(std::string_view incoming_id, TimePoint now) {
  (void)flush_marks(now);
  auto pending = pending_of(incoming_id);
  if (!pending.ok()) {
    log_warn(log_, "idem: outbox: reading the unsent messages of {} failed: {}", printable(incoming_id),
             pending.status().to_string());
    return pending.status();
  }
  return send(*pending);
}

std::size_t Dispatcher::resend(TimePoint up_to, TimePoint now) {
  std::size_t total = 0;
  for (;;) {
    OutboxQuery q;
    q.created_up_to = up_to;
    q.max = o_.dispatch_batch;
    auto pending = store_.outbox()->outbox_pending(q);
    if (!pending.ok()) {
      log_warn(log_, "idem: outbox: reading unsent messages failed: {}", pending.status().to_string());
      return total;
    }
    if (pending->empty()) return total;
    const Status sent = send(*pending);
    if (!flush_marks(now).ok() || !sent.ok()) return total;
    total += pending->size();
    if (pending->size() < q.max) return total;
  }
}

std::size_t Dispatcher::maybe_resend(TimePoint now) {
  const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const bool first = !resent_once_.load(std::memory_order_relaxed);
  if (!first && now_ns < next_resend_ns_.load(std::memory_order_relaxed)) return 0;
  std::unique_lock lock(resend_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  (void)flush_marks(now);
  const bool startup = !resent_once_.exchange(true);
  next_resend_ns_.store(now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(o_.resend_after).count());
  const std::size_t n = resend(startup ? TimePoint::max() : now - o_.resend_after, now);
  if (n > 0) log_info(log_, "idem: outbox: resent {} messages left unsent", n);
  return n;
}

}  // namespace idem::detail
