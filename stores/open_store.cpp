#include "idem/open_store.hpp"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "idem/backend/store_uri.hpp"
#include "idem/memory_store.hpp"
#ifdef IDEM_WITH_SQLITE
#include "idem/sqlite_store.hpp"
#endif
#ifdef IDEM_WITH_REDIS
#include "idem/redis_store.hpp"
#endif
#ifdef IDEM_WITH_ROCKSDB
#include "idem/rocksdb_store.hpp"
#endif
#ifdef IDEM_WITH_POSTGRES
#include "idem/postgres_store.hpp"
#endif
#ifdef IDEM_WITH_BLOOM
#include "idem/bloom_store.hpp"
#endif
#if defined(IDEM_WITH_BLOOM) && defined(IDEM_WITH_ROCKSDB)
#include "idem/bloom_rocksdb.hpp"
#endif

namespace idem {


namespace {

// The store of u, or a null pointer when this build knows no store of u's scheme
// (`known` then lists those it knows).
StatusOr<std::shared_ptr<Store>> open_parsed(const StoreUri& u, std::string& known);

#ifdef IDEM_WITH_BLOOM
// bloom+X:… — a Bloom front filter over the store X:…. The filter's parameters
// (capacity, fp, window, generations) are taken out; the rest go to X.
StatusOr<std::shared_ptr<Store>> open_bloom_front(const StoreUri& u, std::string& known) {
  StoreUri durable_uri;
  durable_uri.scheme = u.scheme.substr(std::string_view("bloom+").size());
  durable_uri.body = u.body;
  StoreUri filter_uri;
  filter_uri.scheme = "bloom";
  for (const auto& [name, value] : u.params) {
    const bool filter_param = name == "capacity" || name == "fp" || name == "window" || name == "generations";
    (filter_param ? filter_uri : durable_uri).params.emplace_back(name, value);
  }
  bloom::Options fo = bloom::front_options();
  if (Status s = bloom::parse_filter_params(filter_uri, fo); !s.ok()) return s;
  if (durable_uri.scheme.rfind("bloom", 0) == 0)
    return invalid_argument("bloom+: the durable store cannot be a bloom store");
#ifdef IDEM_WITH_ROCKSDB
  if (durable_uri.scheme == "rocksdb") {
    auto rocks = rocksdb::open(durable_uri);
    if (!rocks.ok()) return rocks.status();
    return bloom_rocksdb::open_front(std::move(rocks).value(), fo);
  }
#endif
  auto durable = open_parsed(durable_uri, known);
  if (!durable.ok() || *durable == nullptr) return durable;
  return bloom::open_front(std::move(durable).value(), fo, {});
}
#endif

StatusOr<std::shared_ptr<Store>> open_parsed(const StoreUri& u, std::string& known) {
  known = "memory:";
  if (u.scheme == "memory") return memory::open(u);
#ifdef IDEM_WITH_SQLITE
  known += ", sqlite:PATH";
  if (u.scheme == "sqlite") return sqlite::open(u);
#endif
#ifdef IDEM_WITH_REDIS
  known += ", redis[s]://HOST:PORT";
  if (u.scheme == "redis" || u.scheme == "rediss") return redis::open(u);
#endif
#ifdef IDEM_WITH_ROCKSDB
  known += ", rocksdb:PATH";
  if (u.scheme == "rocksdb") return rocksdb::open(u);
#endif
#ifdef IDEM_WITH_POSTGRES
  known += ", postgres://USER@HOST/DB";
  if (u.scheme == "postgres" || u.scheme == "postgresql") return postgres::open(u);
#endif
#ifdef IDEM_WITH_BLOOM
  known += ", bloom:[SNAPSHOT]?capacity=N&fp=F&window=W, bloom+<durable>:…";
  if (u.scheme == "bloom") return bloom::open(u);
  if (u.scheme.rfind("bloom+", 0) == 0) {
    std::string inner_known;
    auto s = open_bloom_front(u, inner_known);
    if (s.ok() && *s == nullptr)
      return invalid_argument("unknown durable store in \"" + u.scheme + ":\"; this build knows " + known);
    return s;
  }
#endif
  return std::shared_ptr<Store>();
}

}  // namespace

StatusOr<std::shared_ptr<Store>> open_store(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  std::string known;
  auto store = open_parsed(*u, known);
  // A store may quote its path or server in an error; never the URI's password.
  if (!store.ok()) return Status(store.status().code(), scrub_secrets(store.status().message(), uri));
  if (*store == nullptr) return invalid_argument("unknown store scheme \"" + u->scheme + ":\"; this build knows " + known);
  return store;
}

}  // namespace idem
