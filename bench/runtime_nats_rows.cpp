// The NATS JetStream rows of idem_bench_runtime (see bench_runtime.cpp).
#include <nats/nats.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/nats_source.hpp"
#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"
#include "support/nats_server.hpp"

namespace idem::bench {
namespace {

// A durable pull consumer with nats.c: Fetch(batch) and one Ack per message until n,
// nothing else (the raw primitive idem's NATS source is built on).
double plain_nats(int port, std::size_t n, std::size_t batch) {
  nats::Options o;
  o.port = static_cast<std::uint16_t>(port);
  o.stream = "plain";
  o.durable = "g";
  // Declares the stream and the durable exactly as idem's source does, then lets go.
  if (auto declared = nats::open(o); !declared.ok()) return 0;
  natsConnection* nc = nullptr;
  const std::string url = "nats://127.0.0.1:" + std::to_string(port);
  if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) return 0;
  jsCtx* js = nullptr;
  natsConnection_JetStream(&js, nc, nullptr);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = "plain";
  so.Consumer = "g";
  natsSubscription* sub = nullptr;
  js_PullSubscribe(&sub, js, "plain", "g", nullptr, &so, nullptr);
  std::size_t got = 0;
  const auto t0 = Clock::now();
  while (got < n && sub != nullptr) {
    natsMsgList list{};
    if (natsSubscription_Fetch(&list, sub, static_cast<int>(batch), 1000, nullptr) != NATS_OK) break;
    for (int i = 0; i < list.Count; ++i) natsMsg_Ack(list.Msgs[i], nullptr);
    got += static_cast<std::size_t>(list.Count);
    natsMsgList_Destroy(&list);
  }
  natsConnection_Flush(nc);
  const double r = rate(got, Clock::now() - t0);
  if (sub != nullptr) natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return r;
}

// idem's runtime over the NATS source with a transactional SQLite consumer whose
// handler inserts one effect row (prepared once), 2 workers, batch b.
double idem_nats(int port, std::size_t n, std::size_t batch, const std::string& db) {
  nats::Options no;
  no.port = static_cast<std::uint16_t>(port);
  no.stream = "idem";
  no.durable = "g";
  auto src = nats::open(no).value();
  return idem_rate(*src, n, batch, db, /*close_timed=*/true);  // close flushes the last acks
}

}  // namespace

bool nats_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows) {
  auto server = nats_test::NatsServer::start();
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start nats-server: %s\n", server.status().to_string().c_str());
    return false;
  }
  const int port = (*server)->port();
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  for (const char* stream : {"plain", "idem"}) {
    nats::Options po;
    po.port = static_cast<std::uint16_t>(port);
    po.stream = stream;
    auto p = nats::open_publisher(po);
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", stream);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-nats-" + std::to_string(port));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back(
      {"plain_nats", "JetStream pull consumer: Fetch(b) + Ack per message, no dedup", plain_nats(port, n, batch)});
  rows.push_back({"idem_nats", "runtime, NATS source, SQLite transactional, 2 workers, batch b",
                  idem_nats(port, n, batch, (dir / "idem.db").string())});
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace idem::bench
