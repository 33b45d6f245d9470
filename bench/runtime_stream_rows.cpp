// The Redis Streams rows of idem_bench_runtime (see bench_runtime.cpp).
#include <hiredict/hiredict.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/redis_stream_source.hpp"
#include "runtime_rows.hpp"
#include "support/redis_server.hpp"

namespace idem::bench {
namespace {

// XREADGROUP COUNT batch + one XACK per batch until n entries; `each` sees every id.
template <class Each>
double plain_loop(int port, const std::string& stream, std::size_t n, std::size_t batch, Each each) {
  redictContext* c = redictConnect("127.0.0.1", port);
  freeReplyObject(redictCommand(c, "XGROUP CREATE %s g 0 MKSTREAM", stream.c_str()));
  const std::string count = std::to_string(batch);
  std::vector<const char*> read{"XREADGROUP", "GROUP",        "g", "c", "COUNT", count.c_str(), "BLOCK", "1000",
                                "STREAMS",    stream.c_str(), ">"};
  std::size_t got = 0;
  const auto t0 = Clock::now();
  while (got < n) {
    auto* r = static_cast<redictReply*>(redictCommandArgv(c, static_cast<int>(read.size()), read.data(), nullptr));
    if (r == nullptr || r->type != REDICT_REPLY_ARRAY) break;
    const redictReply* entries = r->element[0]->element[1];
    std::vector<const char*> argv{"XACK", stream.c_str(), "g"};
    for (std::size_t i = 0; i < entries->elements; ++i) {
      argv.push_back(entries->element[i]->element[0]->str);
      each(std::string(entries->element[i]->element[1]->element[1]->str));
    }
    freeReplyObject(redictCommandArgv(c, static_cast<int>(argv.size()), argv.data(), nullptr));
    got += entries->elements;
    freeReplyObject(r);
  }
  const double r = rate(got, Clock::now() - t0);
  redictFree(c);
  return r;
}

double idem_loop(int port, const std::string& stream, std::size_t n, std::size_t batch, const std::string& db) {
  redis_streams::Options ro;
  ro.port = static_cast<std::uint16_t>(port);
  ro.stream = stream;
  ro.group = "g";
  auto src = redis_streams::open(ro).value();
  return idem_rate(*src, n, batch, db);
}

}  // namespace

bool stream_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows) {
  auto server = redis_test::RedisServer::start({});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start redis-server: %s\n", server.status().to_string().c_str());
    return false;
  }
  const int port = (*server)->port();
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  for (const char* stream : {"plain", "naive", "idem"}) {
    redis_streams::Options po;
    po.port = static_cast<std::uint16_t>(port);
    po.stream = stream;
    auto p = redis_streams::open_publisher(po);
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", stream);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-runtime-" + std::to_string(port));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back({"plain_stream", "XREADGROUP COUNT b + XACK per batch, no dedup",
                  plain_loop(port, "plain", n, batch, [](const std::string&) {})});
  BenchDb naive((dir / "naive.db").string());
  rows.push_back({"naive_stream", "same loop; SQLite autocommit check, effect, insert per message",
                  plain_loop(port, "naive", n, batch, [&](const std::string& id) {
                    if (naive.seen(id)) return;
                    naive.exec_id("INSERT INTO effects(id, at_ms) VALUES(?1, 0)", id);
                    naive.exec_id("INSERT INTO seen(id) VALUES(?1)", id);
                  })});
  rows.push_back({"idem_stream", "runtime, Redis Streams source, SQLite transactional, 2 workers, batch b",
                  idem_loop(port, "idem", n, batch, (dir / "idem.db").string())});
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace idem::bench
