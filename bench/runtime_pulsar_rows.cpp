// The Pulsar rows of idem_bench_runtime (see bench_runtime.cpp), on a real Pulsar
// standalone that scripts/broker.sh starts on 127.0.0.1 for the run.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "idem/pulsar_source.hpp"
#include "runtime_rows.hpp"
#include "support/pulsar_server.hpp"
#include "web.hpp"

namespace idem::bench {
namespace {

constexpr std::chrono::milliseconds kWait{10'000};

// A consumer of Pulsar's WebSocket API with the adapter's own WebSocket (Boost.Beast):
// pull mode, a permit for `batch` messages, an ack per message, no dedup. Timed from
// its first message.
double plain_pulsar(std::uint16_t port, std::size_t n, std::size_t batch) {
  auto ws = pulsar::detail::WebSocket::connect(
      {"127.0.0.1", port, ""},
      "/ws/v2/consumer/persistent/public/default/plain/g?subscriptionType=Shared&pullMode=true"
      "&subscriptionInitialPosition=Earliest&receiverQueueSize=" + std::to_string(std::min<std::size_t>(batch, 1000)),
      kWait);
  if (!ws.ok()) return 0;
  const std::string permit = R"({"type":"permit","permitMessages":)" + std::to_string(batch) + "}";
  std::size_t got = 0, permitted = 0;
  Clock::time_point t0{};
  std::string frame;
  while (got < n) {
    if (permitted == got && !(*ws)->write(permit, kWait).ok()) return 0;
    if (permitted == got) permitted += batch;
    auto r = (*ws)->read(&frame, kWait);
    if (!r.ok() || !*r) return 0;
    auto j = nlohmann::json::parse(frame, nullptr, false);
    if (!j.is_object() || !j.contains("payload")) continue;
    if (got++ == 0) t0 = Clock::now();
    if (!(*ws)->write(nlohmann::json{{"messageId", j["messageId"]}}.dump(), kWait).ok()) return 0;
  }
  return rate(got - 1, Clock::now() - t0);
}

// idem's runtime over the Pulsar source with the transactional SQLite consumer, 2
// workers, batch b. Timed once the source has its first message, which it acks itself.
double idem_pulsar(const std::string& uri, std::size_t n, std::size_t batch, const std::string& db) {
  auto src = pulsar::open(pulsar::parse_uri(uri).value());
  if (!src.ok()) return 0;
  std::vector<Delivery> first;
  while (first.empty()) (void)(*src)->fetch(1, Duration(1000), first);
  (void)(*src)->ack(first[0]);
  return idem_rate(**src, n - 1, batch, db);
}

}  // namespace

bool pulsar_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows) {
  auto server = pulsar_test::PulsarServer::start();
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start Pulsar: %s\n", server.status().to_string().c_str());
    return false;
  }
  std::printf("pulsar: standalone %s (scripts/broker.sh), WebSocket API\n", (*server)->version().c_str());
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  for (const char* topic : {"plain", "idem"}) {
    auto p = pulsar::open_publisher(pulsar::parse_uri((*server)->uri(topic, "")).value());
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", topic);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-pulsar-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back({"plain_pulsar", "WebSocket consumer: pull b, an ack per message, no dedup",
                  plain_pulsar((*server)->web_port(), n, batch)});
  rows.push_back({"idem_pulsar", "runtime, Pulsar source, SQLite transactional, 2 workers, batch b",
                  idem_pulsar((*server)->uri("idem", "g", "receiver_queue=1000"), n, batch, (dir / "idem.db").string())});
  std::filesystem::remove_all(dir);
  return rows.back().msgs_per_s > 0 && rows[rows.size() - 2].msgs_per_s > 0;
}

}  // namespace idem::bench
