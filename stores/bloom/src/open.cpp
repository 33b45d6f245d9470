// Opening Bloom stores: options, URI parameters, snapshots.
#include <cctype>
#include <charconv>

#include "bloom_store_impl.hpp"

namespace idem::bloom {
namespace {

// "24h", "90m", "3600s", "500ms", "2d"; a bare number is ms.
StatusOr<Duration> parse_duration(const std::string& text) {
  std::int64_t n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || p == text.data())
    return invalid_argument("bloom: window \"" + text + "\" is not a duration (e.g. 24h, 90m, 3600s, 500ms)");
  const std::string unit(p, end);
  std::int64_t scale = 0;
  if (unit.empty() || unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else if (unit == "d")
    scale = 86'400'000;
  else
    return invalid_argument("bloom: window \"" + text + "\" has an unknown unit (ms, s, m, h or d)");
  if (n <= 0) return invalid_argument("bloom: window \"" + text + "\" must be positive");
  if (n > std::numeric_limits<std::int64_t>::max() / scale)
    return invalid_argument("bloom: window \"" + text + "\" is too long");
  return Duration(n * scale);
}

}  // namespace

Status parse_filter_params(const StoreUri& u, Options& o) {
  auto capacity = u.param_uint("capacity", o.capacity);
  if (!capacity.ok()) return capacity.status();
  auto fp = u.param_double("fp", o.fp);
  if (!fp.ok()) return fp.status();
  auto generations = u.param_uint("generations", o.generations);
  if (!generations.ok()) return generations.status();
  if (auto w = u.param("window")) {
    auto d = parse_duration(*w);
    if (!d.ok()) return d.status();
    o.window = *d;
  }
  o.capacity = *capacity;
  o.fp = *fp;
  if (*generations > 1000) return invalid_argument("bloom: generations must be 1..64");
  o.generations = static_cast<std::uint32_t>(*generations);
  return ok_status();
}

StatusOr<std::shared_ptr<FilterStore>> open(const Options& o) {
  if (Status s = detail::Generations::check_options(o); !s.ok()) return s;
  auto store = std::make_shared<detail::BloomStore>(o);
  if (!o.snapshot_path.empty()) {
    if (Status s = store->restore_snapshot(); !s.ok()) {
      // Do not let the destructor overwrite the file that was refused.
      store->forget_snapshot_path();
      return s;
    }
  }
  return std::shared_ptr<FilterStore>(std::move(store));
}

StatusOr<Options> parse_uri(const StoreUri& u) {
  if (Status s = u.check_params({"capacity", "fp", "window", "generations"}); !s.ok()) return s;
  Options o;
  if (Status s = parse_filter_params(u, o); !s.ok()) return s;
  o.snapshot_path = u.body;
  return o;
}

StatusOr<std::shared_ptr<FilterStore>> open(const StoreUri& u) {
  auto o = parse_uri(u);
  if (!o.ok()) return o.status();
  return open(*o);
}

StatusOr<std::shared_ptr<FrontStore>> open_front(std::shared_ptr<Store> durable, const Options& o, DurableHooks hooks) {
  if (!durable) return invalid_argument("bloom: open_front: the durable store is null");
  if (!o.snapshot_path.empty())
    return invalid_argument("bloom: a front filter warms from its durable store and takes no snapshot path");
  if (Status s = detail::Generations::check_options(o); !s.ok()) return s;
  auto front = std::make_shared<detail::Front>(std::move(durable), o, std::move(hooks));
  if (Status s = front->warm(); !s.ok()) return s;
  return std::shared_ptr<FrontStore>(std::move(front));
}

}  // namespace idem::bloom
