#include "memory_entities.hpp"

#include <algorithm>

#include "idem/backend/request_checks.hpp"

namespace idem::memory_detail {

Entities::Entities(std::size_t stripes) {
  stripes_.reserve(stripes);
  for (std::size_t i = 0; i < stripes; ++i) stripes_.push_back(std::make_unique<Stripe>());
}

EntityRecord Entities::read(std::string_view key) {
  std::lock_guard lock(stripe(key).mu);
  return read_locked(key);
}

Status Entities::write(const EntityWrite& w) {
  auto held = lock(w.key);
  if (Status s = check_locked(w); !s.ok()) return s;
  apply_locked(w);
  return ok_status();
}

std::unique_lock<std::mutex> Entities::lock(std::string_view key) { return std::unique_lock(stripe(key).mu); }

EntityRecord Entities::read_locked(std::string_view key) {
  Stripe& s = stripe(key);
  auto it = s.records.find(key);
  return it == s.records.end() ? EntityRecord{} : it->second;
}

Status Entities::check_locked(const EntityWrite& w) {
  Stripe& s = stripe(w.key);
  auto it = s.records.find(w.key);
  const std::uint64_t revision = it == s.records.end() ? 0 : it->second.revision;
  if (revision != w.expect_revision) {
    return aborted("entity revision is " + std::to_string(revision) + ", the write expected " +
                   std::to_string(w.expect_revision));
  }
  return ok_status();
}

void Entities::apply_locked(const EntityWrite& w) {
  Stripe& s = stripe(w.key);
  auto it = s.records.find(w.key);
  if (it == s.records.end()) it = s.records.emplace(std::string(w.key), EntityRecord{}).first;
  apply_entity_write(w, it->second);
  if (w.unbuffer) remove_locked(s, w.key, *w.unbuffer);
}

Status Entities::put(const BufferPut& p) {
  if (Status s = check_buffer_put(p); !s.ok()) return s;
  Stripe& s = stripe(p.key);
  std::lock_guard lock(s.mu);
  auto kb = s.buffers.find(p.key);
  std::size_t per_key = 0;
  if (kb != s.buffers.end()) {
    auto e = kb->second.find(p.version);
    if (e != kb->second.end()) {
      if (e->second.id == p.id) return ok_status();
      return failed_precondition("reorder buffer already holds another message id for this key and version " +
                                 std::to_string(p.version));
    }
    per_key = kb->second.size();
  }
  if (per_key + 1 > p.limits.per_key) {
    return resource_exhausted("reorder buffer limit per_key=" + std::to_string(p.limits.per_key) +
                              " reached for this key");
  }
  const std::size_t bytes = p.key.size() + p.id.size() + p.message.size();
  {
    std::lock_guard totals(totals_mu_);
    if (count_ + 1 > p.limits.total) {
      return resource_exhausted("reorder buffer limit total=" + std::to_string(p.limits.total) + " entries reached");
    }
    if (bytes_ + bytes > p.limits.total_bytes) {
      return resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(p.limits.total_bytes) +
                                " would be exceeded by an entry of " + std::to_string(bytes) + " bytes");
    }
    ++count_;
    bytes_ += bytes;
  }
  if (kb == s.buffers.end()) kb = s.buffers.emplace(std::string(p.key), KeyBuffer{}).first;
  kb->second.emplace(p.version, Stored{std::string(p.id), std::string(p.message), p.now});
  return ok_status();
}

std::vector<BufferEntry> Entities::read_buffer(std::string_view key, std::size_t max) {
  Stripe& s = stripe(key);
  std::lock_guard lock(s.mu);
  std::vector<BufferEntry> out;
  auto kb = s.buffers.find(key);
  if (kb == s.buffers.end()) return out;
  for (const auto& [version, e] : kb->second) {
    if (out.size() >= max) break;
    out.push_back(BufferEntry{std::string(key), version, e.id, e.message, e.buffered_at});
  }
  return out;
}

void Entities::remove(std::string_view key, std::uint64_t version) {
  Stripe& s = stripe(key);
  std::lock_guard lock(s.mu);
  remove_locked(s, key, version);
}

void Entities::remove_locked(Stripe& s, std::string_view key, std::uint64_t version) {
  auto kb = s.buffers.find(key);
  if (kb == s.buffers.end()) return;
  auto e = kb->second.find(version);
  if (e == kb->second.end()) return;
  const std::size_t bytes = key.size() + e->second.id.size() + e->second.message.size();
  kb->second.erase(e);
  if (kb->second.empty()) s.buffers.erase(kb);
  std::lock_guard totals(totals_mu_);
  --count_;
  bytes_ -= bytes;
}

bool Entities::erase(std::string_view key) {
  Stripe& s = stripe(key);
  std::lock_guard lock(s.mu);
  bool found = false;
  if (auto it = s.records.find(key); it != s.records.end()) {
    s.records.erase(it);
    found = true;
  }
  auto kb = s.buffers.find(key);
  if (kb == s.buffers.end()) return found;
  std::size_t bytes = 0;
  for (const auto& [version, e] : kb->second) bytes += key.size() + e.id.size() + e.message.size();
  const std::size_t count = kb->second.size();
  s.buffers.erase(kb);
  std::lock_guard totals(totals_mu_);
  count_ -= count;
  bytes_ -= bytes;
  return true;
}

BufferSummary Entities::summary(std::size_t max_keys) {
  // All stripes at once (in index order, the only order in which more than one is
  // ever held), so that the totals and the keys describe one moment.
  std::vector<std::unique_lock<std::mutex>> held;
  held.reserve(stripes_.size());
  for (auto& s : stripes_) held.emplace_back(s->mu);
  BufferSummary out;
  {
    std::lock_guard totals(totals_mu_);
    out.count = count_;
    out.bytes = bytes_;
  }
  for (auto& s : stripes_) {
    for (const auto& [key, kb] : s->buffers) {
      BufferedKey k;
      k.key = key;
      k.count = kb.size();
      k.lowest_version = kb.begin()->first;
      k.oldest_at = kb.begin()->second.buffered_at;
      for (const auto& [version, e] : kb) k.oldest_at = std::min(k.oldest_at, e.buffered_at);
      out.keys.push_back(std::move(k));
    }
  }
  auto older = [](const BufferedKey& a, const BufferedKey& b) { return a.oldest_at < b.oldest_at; };
  if (out.keys.size() > max_keys) {
    std::partial_sort(out.keys.begin(), out.keys.begin() + static_cast<std::ptrdiff_t>(max_keys), out.keys.end(),
                      older);
    out.keys.resize(max_keys);
  } else {
    std::sort(out.keys.begin(), out.keys.end(), older);
  }
  return out;
}

}  // namespace idem::memory_detail
