#include "redis_conformance.hpp"

#include <unistd.h>

#include <atomic>
#include <optional>
#include <string_view>

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
  // entity's slot (redis::key_of(store, id, entity_key)).
  f.inspect = [](Store& s, std::string_view id, std::optional<std::string_view> entity_key,
                 TimePoint now) -> StatusOr<std::optional<RecordInfo>> {
    if (!entity_key) return s.inspect(id, now);
    return redis::inspect_with_entity(s, id, *entity_key, now);
  };
  return f;
}

}  // namespace idem::redis_test
