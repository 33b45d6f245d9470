#include "redis_conformance.hpp"

#include <unistd.h>

#include <atomic>
#include <optional>
#include <string_view>

#include "idem/backend/store_wrapper.hpp"
#include "idem/redis_store.hpp"

namespace idem::redis_test {
namespace {

class PrefixLocation final : public conformance::StoreLocation {
 public:
  explicit PrefixLocation(std::function<std::string()> uri) : uri_(std::move(uri)) {
    static std::atomic<int> counter{0};
    prefix_ = "conf-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ":";
  }

  StatusOr<std::shared_ptr<Store>> open(FaultHook) override {
    auto u = StoreUri::parse(uri_());
    if (!u.ok()) return u.status();
    auto o = redis::parse_uri(*u);
    if (!o.ok()) return o.status();
    o->prefix = prefix_;
    return redis::open(*o);
  }

 private:
  std::function<std::string()> uri_;
  std::string prefix_;
};

}  // namespace

conformance::StoreFactory redis_factory(std::string name, std::function<std::string()> uri) {
  conformance::StoreFactory f;
  f.name = std::move(name);
  f.capabilities.durable = true;  // the server keeps records when a handle closes
  f.capabilities.shared = true;
  f.capabilities.probabilistic = false;
  f.capabilities.entities = true;
  f.capabilities.combined_commit_claim = true;  // the commit and the claim share one pipeline
  f.capabilities.fault_hook = false;
  f.capabilities.no_fault_hook_reason =
      "redis: a commit is one Lua script that the server runs atomically; the client has no intermediate step "
      "at which a failure could leave part of it applied";
  f.new_location = [uri] { return std::make_unique<PrefixLocation>(uri); };
  // On a cluster, the record of an id claimed with an entity key lives in the
  // entity's slot (RedisStore::record_key(id, entity_key)). The suite may hand over
  // the store inside a wrapper of its own: its base() is the store of redis::open.
  f.inspect = [](Store& s, std::string_view id, std::optional<std::string_view> entity_key,
                 TimePoint now) -> StatusOr<std::optional<RecordInfo>> {
    if (!entity_key) return s.inspect(id, now);
    Store* base = &s;
    while (auto* w = dynamic_cast<StoreWrapper*>(base)) base = w->base().get();
    auto* r = dynamic_cast<redis::RedisStore*>(base);
    if (r == nullptr) return invalid_argument("not a store of redis::open");
    return r->inspect_with_entity(id, *entity_key, now);
  };
  return f;
}

}  // namespace idem::redis_test
