#include "generations.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "idem/fingerprint.hpp"

namespace idem::bloom::detail {
namespace {

constexpr std::uint32_t kMaxGenerations = 64;
constexpr std::uint64_t kLibbloomMinEntries = 1000;  // bloom_init refuses fewer
constexpr char kMagic[8] = {'I', 'D', 'E', 'M', 'B', 'L', 'M', '\0'};
constexpr std::uint32_t kSnapshotFormat = 1;

std::uint64_t per_gen_entries(const Options& o) {
  const std::uint64_t n = (o.capacity + o.generations - 1) / o.generations;
  return n < kLibbloomMinEntries ? kLibbloomMinEntries : n;
}

// The rate per filter so that a lookup over generations + 1 filters stays within fp.
double per_gen_rate(const Options& o) { return o.fp / (o.generations + 1); }

template <class T>
void put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof v);
  out.append(buf, sizeof buf);
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  bool get(T& v) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return true;
  }
  bool bytes(unsigned char* dst, std::size_t n) {
    if (in_.size() - at_ < n) return false;
    std::memcpy(dst, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::size_t remaining() const { return in_.size() - at_; }

 private:
  std::string_view in_;
  std::size_t at_ = 0;
};

}  // namespace

Status Generations::check_options(const Options& o) {
  if (o.capacity == 0) return invalid_argument("bloom: capacity must be > 0 (ids per window)");
  if (!(o.fp > 0.0 && o.fp < 1.0))
    return invalid_argument("bloom: fp must be > 0 and < 1 (a false-positive rate), got " + std::to_string(o.fp));
  if (o.window.count() <= 0) return invalid_argument("bloom: window must be > 0 ms");
  if (o.generations == 0 || o.generations > kMaxGenerations)
    return invalid_argument("bloom: generations must be 1.." + std::to_string(kMaxGenerations) + ", got " +
                            std::to_string(o.generations));
  if (o.window.count() < o.generations)
    return invalid_argument("bloom: window (" + std::to_string(o.window.count()) + " ms) must be at least " +
                            std::to_string(o.generations) + " ms, one per generation");
  // libbloom 1.6 counts bits in an int.
  const double bpe = -std::log(per_gen_rate(o)) / (std::log(2.0) * std::log(2.0));
  const double bits = static_cast<double>(per_gen_entries(o)) * bpe;
  if (bits >= static_cast<double>(std::numeric_limits<int>::max()) || per_gen_entries(o) > INT32_MAX)
    return invalid_argument("bloom: capacity " + std::to_string(o.capacity) + " at fp " + std::to_string(o.fp) +
                            " needs " + std::to_string(static_cast<std::uint64_t>(bits)) +
                            " bits per filter; libbloom addresses at most 2^31 - 1: raise generations or lower "
                            "capacity");
  return ok_status();
}

Generations::Generations(const Options& o, DropRule rule)
    : o_(o),
      rule_(rule),
      per_gen_(per_gen_entries(o)),
      per_gen_fp_(per_gen_rate(o)),
      slice_ms_(o.window.count() / o.generations) {
  // The geometry libbloom gives every filter of these options (check_options()
  // guarantees bloom_init accepts them).
  struct bloom probe {};
  (void)bloom_init(&probe, static_cast<int>(per_gen_), per_gen_fp_);
  geometry_ = Geometry(static_cast<std::uint32_t>(probe.bits), static_cast<std::uint32_t>(probe.hashes));
  bloom_free(&probe);
}

Generations::~Generations() {
  for (auto& g : gens_) bloom_free(&g->filter);
}

std::unique_ptr<Generations::Gen> Generations::make_gen(std::int64_t now_ms) const {
  auto g = std::make_unique<Gen>();
  // check_options() guarantees libbloom accepts these parameters.
  (void)bloom_init(&g->filter, static_cast<int>(per_gen_), per_gen_fp_);
  g->start_ms = now_ms;
  g->last_ms = now_ms;
  g->max_expiry_ms = std::numeric_limits<std::int64_t>::min();
  return g;
}

bool Generations::live(const Gen& g, std::int64_t now_ms) const {
  if (rule_ == DropRule::kWindow) return g.last_ms > now_ms - o_.window.count();
  return g.max_expiry_ms > now_ms;
}

void Generations::drop_oldest(bool early) {
  Gen& g = *gens_.front();
  if (g.count > 0) dropped_max_expiry_ms_ = std::max(dropped_max_expiry_ms_, g.max_expiry_ms);
  if (early) ++early_drops_;
  bloom_free(&g.filter);
  gens_.pop_front();
}

void Generations::drop_expired(std::int64_t now_ms) {
  // Filters are ordered by age; under kAllExpired a younger one may expire first, so
  // only the oldest are dropped (the rest wait their turn; they still answer).
  while (!gens_.empty() && !live(*gens_.front(), now_ms) && gens_.size() > 1) drop_oldest(false);
  if (gens_.size() == 1 && !live(*gens_.front(), now_ms) && gens_.front()->count > 0) drop_oldest(false);
}

Generations::Gen& Generations::newest_for(std::int64_t now_ms) {
  drop_expired(now_ms);
  const bool need_new =
      gens_.empty() || gens_.back()->count >= per_gen_ || now_ms - gens_.back()->start_ms >= slice_ms_;
  if (need_new) {
    gens_.push_back(make_gen(now_ms));
    while (gens_.size() > o_.generations + 1) drop_oldest(true);
  }
  return *gens_.back();
}

bool Generations::maybe_contains(Probe p, std::int64_t now_ms) {
  const unsigned char* filters[kMaxGenerations + 1];
  std::size_t n = 0;
  for (const auto& g : gens_)
    if (g->count > 0 && live(*g, now_ms)) filters[n++] = g->filter.bf;
  return n > 0 && geometry_.test_any(filters, n, p);
}

void Generations::prefetch_lookup(Probe p, std::int64_t now_ms) const {
  // A lookup of a new id leaves most filters at their first or second bit.
  constexpr std::uint32_t kLookupBits = 2;
  for (const auto& g : gens_)
    if (g->count > 0 && live(*g, now_ms)) geometry_.prefetch(g->filter.bf, p, kLookupBits, false);
}

void Generations::prefetch_add(Probe p) const {
  if (!gens_.empty()) geometry_.prefetch(gens_.back()->filter.bf, p, geometry_.hashes(), true);
}

void Generations::add(Probe p, std::int64_t now_ms, std::int64_t expires_ms) {
  Gen& g = newest_for(now_ms);
  if (geometry_.set(g.filter.bf, p)) ++g.count;
  g.last_ms = std::max(g.last_ms, now_ms);
  g.max_expiry_ms = std::max(g.max_expiry_ms, expires_ms);
}

void Generations::add_warm(std::string_view id, std::int64_t expires_ms) {
  if (gens_.empty() || gens_.back()->count >= per_gen_) {
    gens_.push_back(make_gen(std::numeric_limits<std::int64_t>::min() / 2));
    while (gens_.size() > o_.generations + 1) drop_oldest(true);
  }
  Gen& g = *gens_.back();
  if (geometry_.set(g.filter.bf, probe_of(id))) ++g.count;
  g.max_expiry_ms = std::max(g.max_expiry_ms, expires_ms);
}

std::int64_t Generations::remembered_until(std::string_view id, std::int64_t now_ms) {
  const Probe p = probe_of(id);
  for (auto it = gens_.rbegin(); it != gens_.rend(); ++it) {
    Gen& g = **it;
    if (g.count == 0 || !live(g, now_ms)) continue;
    if (geometry_.test(g.filter.bf, p))
      return rule_ == DropRule::kWindow ? g.last_ms + o_.window.count() : g.max_expiry_ms;
  }
  return now_ms;
}

Stats Generations::stats() const {
  Stats s;
  s.filters = gens_.size();
  for (const auto& g : gens_) {
    s.filter_bytes += static_cast<std::size_t>(g->filter.bytes);
    s.ids += g->count;
  }
  const double bpe = -std::log(per_gen_fp_) / (std::log(2.0) * std::log(2.0));
  s.bits_per_id = bpe * static_cast<double>(per_gen_) * (o_.generations + 1) / static_cast<double>(o_.capacity);
  s.early_drops = early_drops_;
  return s;
}

std::string Generations::serialize() const {
  std::string out(kMagic, sizeof kMagic);
  put<std::uint32_t>(out, kSnapshotFormat);
  put<std::uint64_t>(out, o_.capacity);
  put<double>(out, o_.fp);
  put<std::int64_t>(out, o_.window.count());
  put<std::uint32_t>(out, o_.generations);
  put<std::int64_t>(out, dropped_max_expiry_ms_);
  put<std::uint64_t>(out, early_drops_);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(gens_.size()));
  for (const auto& g : gens_) {
    put<std::int64_t>(out, g->start_ms);
    put<std::int64_t>(out, g->last_ms);
    put<std::int64_t>(out, g->max_expiry_ms);
    put<std::uint64_t>(out, g->count);
    put<std::int32_t>(out, g->filter.bits);
    put<std::int32_t>(out, g->filter.hashes);
    put<std::int32_t>(out, g->filter.bytes);
    out.append(reinterpret_cast<const char*>(g->filter.bf), static_cast<std::size_t>(g->filter.bytes));
  }
  put<std::uint64_t>(out, fingerprint(out));
  return out;
}

Status Generations::restore(std::string_view bytes) {
  constexpr std::size_t kHeader = sizeof kMagic + 4 + 8 + 8 + 8 + 4 + 8 + 8 + 4;
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return data_loss("bloom: the snapshot is not an idem bloom snapshot (bad magic)");
  if (bytes.size() < kHeader + 8)
    return data_loss("bloom: the snapshot is truncated (" + std::to_string(bytes.size()) + " bytes)");
  Reader r(bytes.substr(sizeof kMagic));
  std::uint32_t format = 0, generations = 0, n = 0;
  std::uint64_t capacity = 0, early = 0;
  double fp = 0;
  std::int64_t window = 0, dropped = 0;
  r.get(format);
  if (format != kSnapshotFormat)
    return data_loss("bloom: the snapshot has format " + std::to_string(format) + ", this build reads " +
                     std::to_string(kSnapshotFormat));
  r.get(capacity);
  r.get(fp);
  r.get(window);
  r.get(generations);
  r.get(dropped);
  r.get(early);
  r.get(n);
  if (capacity != o_.capacity || fp != o_.fp || window != o_.window.count() || generations != o_.generations)
    return failed_precondition("bloom: the snapshot belongs to other options (capacity=" + std::to_string(capacity) +
                               " fp=" + std::to_string(fp) + " window=" + std::to_string(window) +
                               "ms generations=" + std::to_string(generations) +
                               "; this store has capacity=" + std::to_string(o_.capacity) +
                               " fp=" + std::to_string(o_.fp) + " window=" + std::to_string(o_.window.count()) +
                               "ms generations=" + std::to_string(o_.generations) + ")");
  if (n > o_.generations + 1) return data_loss("bloom: the snapshot has " + std::to_string(n) + " filters, too many");
  std::deque<std::unique_ptr<Gen>> gens;
  auto free_all = [&] {
    for (auto& g : gens) bloom_free(&g->filter);
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    auto g = make_gen(0);
    std::int32_t bits = 0, hashes = 0, nbytes = 0;
    bool ok = r.get(g->start_ms) && r.get(g->last_ms) && r.get(g->max_expiry_ms) && r.get(g->count) && r.get(bits) &&
              r.get(hashes) && r.get(nbytes);
    if (ok && (bits != g->filter.bits || hashes != g->filter.hashes || nbytes != g->filter.bytes)) {
      bloom_free(&g->filter);
      free_all();
      return failed_precondition("bloom: the snapshot's filters have another geometry (another libbloom?)");
    }
    ok = ok && r.bytes(g->filter.bf, static_cast<std::size_t>(nbytes));
    gens.push_back(std::move(g));
    if (!ok) {
      free_all();
      return data_loss("bloom: the snapshot is truncated (in filter " + std::to_string(i) + ")");
    }
  }
  std::uint64_t sum = 0;
  if (r.remaining() != sizeof sum || !r.get(sum)) {
    free_all();
    return data_loss(r.remaining() < sizeof sum ? "bloom: the snapshot is truncated (no checksum)"
                                                : "bloom: the snapshot has trailing bytes");
  }
  if (sum != fingerprint(bytes.substr(0, bytes.size() - sizeof sum))) {
    free_all();
    return data_loss("bloom: the snapshot is corrupt (checksum mismatch)");
  }
  for (auto& g : gens_) bloom_free(&g->filter);
  gens_ = std::move(gens);
  dropped_max_expiry_ms_ = dropped;
  early_drops_ = early;
  return ok_status();
}

}  // namespace idem::bloom::detail
