// The standalone, probabilistic Bloom store.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bloom_store_impl.hpp"
#include "idem/backend/request_checks.hpp"

namespace idem::bloom::detail {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Writes bytes to path atomically: path.tmp, fsync, rename, fsync of the directory.
Status write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return unavailable("bloom: cannot write snapshot \"" + tmp + "\": " + errno_text());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string e = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      return unavailable("bloom: cannot write snapshot \"" + tmp + "\": " + e);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return unavailable("bloom: cannot sync snapshot \"" + tmp + "\": " + errno_text());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = errno_text();
    ::unlink(tmp.c_str());
    return unavailable("bloom: cannot replace snapshot \"" + path + "\": " + e);
  }
  const auto dir = std::filesystem::path(path).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
}

}  // namespace

BloomStore::~BloomStore() {
  if (!options_.snapshot_path.empty()) (void)snapshot();
}

Status BloomStore::restore_snapshot() {
  std::error_code ec;
  if (!std::filesystem::exists(options_.snapshot_path, ec)) return ok_status();
  if (std::filesystem::is_directory(options_.snapshot_path, ec))
    return invalid_argument("bloom: snapshot path \"" + options_.snapshot_path + "\" is a directory");
  std::ifstream in(options_.snapshot_path, std::ios::binary);
  if (!in) return unavailable("bloom: cannot read snapshot \"" + options_.snapshot_path + "\": " + errno_text());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::lock_guard lock(mu_);
  Status s = filter_.restore(bytes);
  if (!s.ok()) return {s.code(), s.message() + " (file \"" + options_.snapshot_path + "\")"};
  return ok_status();
}

Status BloomStore::snapshot() {
  if (options_.snapshot_path.empty()) return failed_precondition("bloom: no snapshot_path is set");
  std::string bytes;
  {
    std::lock_guard lock(mu_);
    bytes = filter_.serialize();
  }
  return write_atomically(options_.snapshot_path, bytes);
}

Stats BloomStore::stats() {
  std::lock_guard lock(mu_);
  return filter_.stats();
}

StoreCapabilities BloomStore::capabilities() const {
  StoreCapabilities c;
  c.durable = false;
  c.shared = false;
  c.probabilistic = true;
  c.false_positive_rate = options_.fp;
  c.transactional = false;
  c.native_ttl = true;
  return c;
}

StatusOr<ClaimResult> BloomStore::claim(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  const Probe p = probe_of(q.id);
  const HashedId h = hashed(q.id, p);
  Stripe& s = stripes_.of(p);
  std::lock_guard lock(mu_);
  auto it = s.leases.find(h);
  // The filter is asked only for an id without a lease: one leased and not committed
  // since is not in it, so a hit there would be a false positive.
  if (it != s.leases.end() && it->second.until_ms > now) {
    const HeldLease held{it->second.fingerprint, it->second.owner, it->second.until_ms};
    return *answer_held(q, now, nullptr, &held);
  }
  if (it == s.leases.end() && filter_.maybe_contains(p, now)) {
    const HeldRecord held{};  // a filter keeps no fingerprint nor result
    return *answer_held(q, now, &held, nullptr);
  }
  if (it != s.leases.end()) {
    it->second = Lease{std::string(q.owner), now + q.lease.count(), q.fingerprint};
  } else {
    s.add_lease(h, q.owner, now + q.lease.count(), q.fingerprint);
  }
  filter_.prefetch_add(p);  // the commit that follows sets these bits
  return ClaimResult::granted(s.retries.empty() ? 0 : s.retries_of(q.id, now));
}

Status BloomStore::commit(const CommitRequest& q) {
  if (Status s = check_commit(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  const Probe p = probe_of(q.id);
  Stripe& s = stripes_.of(p);
  std::lock_guard lock(mu_);
  auto it = s.leases.find(hashed(q.id, p));
  if (it != s.leases.end()) {
    if (it->second.until_ms > now && it->second.owner != q.owner)
      return failed_precondition("bloom: commit: the lease is held by another owner");
  } else if (filter_.maybe_contains(p, now)) {
    return failed_precondition("bloom: commit: the id is already completed (or a false positive of the filter)");
  }
  filter_.add(p, now, now + q.ttl.count());
  if (it != s.leases.end()) s.end_lease(it);
  if (!s.retries.empty()) {
    if (auto r = s.retries.find(q.id); r != s.retries.end()) s.retries.erase(r);
  }
  return ok_status();
}

StatusOr<std::uint32_t> BloomStore::release(const ReleaseRequest& q) {
  if (Status s = check_release(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  const Probe p = probe_of(q.id);
  Stripe& s = stripes_.of(p);
  std::lock_guard lock(mu_);
  auto it = s.leases.find(hashed(q.id, p));
  std::uint32_t count = s.retries_of(q.id, now);
  if (it != s.leases.end() && it->second.until_ms > now && it->second.owner != q.owner) return count;
  if (it == s.leases.end() && filter_.maybe_contains(p, now)) return std::uint32_t{0};
  if (q.count_retry) {
    ++count;
    s.retries[std::string(q.id)] = RetryCount{count, now + q.retry_ttl.count()};
  }
  if (it != s.leases.end()) s.leases.erase(it);
  return count;
}

Status BloomStore::extend(const ExtendRequest& q) {
  if (Status s = check_extend(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  const Probe p = probe_of(q.id);
  Stripe& s = stripes_.of(p);
  std::lock_guard lock(mu_);
  auto it = s.leases.find(hashed(q.id, p));
  if (it == s.leases.end() || it->second.owner != q.owner)
    return failed_precondition("bloom: extend: the lease is not held by this owner");
  if (it->second.until_ms <= now) return failed_precondition("bloom: extend: the lease expired");
  it->second.until_ms = now + q.lease.count();
  return ok_status();
}

StatusOr<std::optional<RecordInfo>> BloomStore::inspect(std::string_view id, TimePoint t) {
  const std::int64_t now = to_unix_ms(t);
  const Probe p = probe_of(id);
  Stripe& s = stripes_.of(p);
  std::lock_guard lock(mu_);
  RecordInfo info;
  info.retries = s.retries_of(id, now);
  auto it = s.leases.find(hashed(id, p));
  if (it != s.leases.end() && it->second.until_ms > now) {
    info.state = RecordState::kInProgress;
    info.owner = it->second.owner;
    info.lease_until = from_unix_ms(it->second.until_ms);
    info.fingerprint = it->second.fingerprint;
    return std::optional<RecordInfo>(std::move(info));
  }
  if (it == s.leases.end()) {
    if (filter_.maybe_contains(p, now)) {
      info.state = RecordState::kCompleted;
      info.retries = 0;
      info.expires_at = from_unix_ms(filter_.remembered_until(id, now));
      return std::optional<RecordInfo>(std::move(info));
    }
  }
  if (info.retries > 0) {
    info.state = RecordState::kPending;
    info.expires_at = from_unix_ms(s.retries.find(id)->second.expires_ms);
    return std::optional<RecordInfo>(std::move(info));
  }
  return std::optional<RecordInfo>();
}

StatusOr<std::size_t> BloomStore::purge_expired(TimePoint t, std::size_t max_records) {
  // The filters expire by themselves (native TTL). Expired leases and retry counts
  // are dropped here, bounded; they are not records, so 0 is returned.
  const std::int64_t now = to_unix_ms(t);
  std::size_t budget = max_records;  // entries looked at, starting where the last call stopped
  auto& all = stripes_.all();
  for (std::size_t k = 0; k < all.size() && budget > 0; ++k) {
    std::lock_guard lock(mu_);
    Stripe& sp = *all[purge_cursor_.fetch_add(1, std::memory_order_relaxed) % all.size()];
    for (auto it = sp.retries.begin(); it != sp.retries.end() && budget > 0; --budget) {
      const bool dead = it->second.expires_ms <= now && !sp.leases.contains(hashed(it->first, probe_of(it->first)));
      it = dead ? sp.retries.erase(it) : std::next(it);
    }
    for (auto it = sp.leases.begin(); it != sp.leases.end() && budget > 0; --budget) {
      it = it->second.until_ms <= now ? sp.leases.erase(it) : std::next(it);
    }
  }
  return std::size_t{0};
}

}  // namespace idem::bloom::detail
