#include "idem/open_store.hpp"

#include <string>

#include "idem/memory_store.hpp"
#include "idem/store_uri.hpp"
#ifdef IDEM_WITH_SQLITE
#include "idem/sqlite_store.hpp"
#endif

namespace idem {
namespace {

StatusOr<std::shared_ptr<Store>> open_memory(const StoreUri& u) {
  if (Status s = u.check_params({"max_records", "shards"}); !s.is_ok()) return s;
  if (!u.body.empty()) return invalid_argument("memory: takes no path, got \"" + u.body + "\"");
  MemoryStoreOptions o;
  auto max = u.param_uint("max_records", o.max_records);
  auto shards = u.param_uint("shards", o.shards);
  if (!max.ok()) return max.status();
  if (!shards.ok()) return shards.status();
  o.max_records = *max;
  o.shards = *shards;
  return open_memory_store(o);
}

}  // namespace

StatusOr<std::shared_ptr<Store>> open_store(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  std::string known = "memory:";
  if (u->scheme == "memory") return open_memory(*u);
#ifdef IDEM_WITH_SQLITE
  known += ", sqlite:PATH";
  if (u->scheme == "sqlite") return sqlite::open(*u);
#endif
  return invalid_argument("unknown store scheme \"" + u->scheme + ":\"; this build knows " + known);
}

}  // namespace idem
