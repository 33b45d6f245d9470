// Uses an installed idem: a consumer on memory: (and sqlite: when installed) must
// process one message and answer a duplicate.
#include <idem/idem.hpp>
#include <idem/open_store.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

struct Msg {
  std::string id;
};

int check(const std::string& uri) {
  auto store = idem::open_store(uri);
  if (!store.ok()) {
    std::fprintf(stderr, "open_store(%s): %s\n", uri.c_str(), store.status().to_string().c_str());
    return 1;
  }
  idem::ConsumerOptions opts;
  opts.store = *store;
  idem::Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  int runs = 0;
  auto consumer = idem::Consumer<Msg>::create(opts, ex, [&](const Msg&, idem::HandlerContext&) {
    ++runs;
    return idem::HandlerResult::ok();
  });
  if (!consumer.ok()) {
    std::fprintf(stderr, "create: %s\n", consumer.status().to_string().c_str());
    return 1;
  }
  const auto first = consumer->process(Msg{"a-1"});
  const auto second = consumer->process(Msg{"a-1"});
  if (first.reason != idem::Reason::kProcessed || second.reason != idem::Reason::kDuplicate || runs != 1) {
    std::fprintf(stderr, "%s: unexpected decisions %s, %s (runs %d)\n", uri.c_str(),
                 std::string(idem::reason_name(first.reason)).c_str(),
                 std::string(idem::reason_name(second.reason)).c_str(), runs);
    return 1;
  }
  std::printf("%s: ok\n", uri.c_str());
  return 0;
}

}  // namespace

int main() {
  int rc = check("memory:");
#ifdef HAVE_IDEM_SQLITE
  const auto db = std::filesystem::temp_directory_path() / ("idem-package-" + std::to_string(::getpid()) + ".db");
  rc |= check("sqlite:" + db.string());
  std::filesystem::remove(db);
  std::filesystem::remove(db.string() + "-wal");
  std::filesystem::remove(db.string() + "-shm");
#endif
#ifdef HAVE_IDEM_ROCKSDB
  const auto rdb = std::filesystem::temp_directory_path() / ("idem-package-rocksdb-" + std::to_string(::getpid()));
  rc |= check("rocksdb:" + rdb.string());
#ifdef HAVE_IDEM_BLOOM
  rc |= check("bloom+rocksdb:" + rdb.string() + "-front?capacity=10000");
  std::filesystem::remove_all(rdb.string() + "-front");
#endif
  std::filesystem::remove_all(rdb);
#endif
  return rc;
}
