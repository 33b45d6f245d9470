#include "support/pulsar_server.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "message_id.hpp"
#include "support/broker_script.hpp"
#include "web.hpp"

namespace idem::pulsar_test {
namespace {

using pulsar::detail::Endpoint;
using pulsar::detail::WebSocket;
constexpr std::chrono::milliseconds kTimeout{10'000};


StoredMessage stored(const nlohmann::json& j) {
  StoredMessage m;
  m.payload = pulsar::detail::base64_decode(j.value("payload", std::string())).value_or("");
  m.key = j.value("key", std::string());
  if (j.contains("properties") && j["properties"].is_object()) {
    for (const auto& [name, value] : j["properties"].items())
      if (value.is_string()) m.properties[name] = value.get<std::string>();
  }
  return m;
}

}  // namespace

Status PulsarServer::run_script(const std::string& args, std::string* out) const {
  return testing::run_broker_script(IDEM_BROKER_SCRIPT, args, out);
}

StatusOr<std::unique_ptr<PulsarServer>> PulsarServer::start(const std::string& address, const std::string& tls_dir) {
  std::unique_ptr<PulsarServer> s(new PulsarServer());
  s->address_ = address;
  std::string out;
  std::string args = "start pulsar --owner " + std::to_string(::getpid()) + " --address " + address;
  if (!tls_dir.empty()) args += " --tls '" + tls_dir + "'";
  Status st = s->run_script(args, &out);
  auto kv = testing::parse_broker_lines(out);
  s->dir_ = kv["DIR"];
  if (!st.ok()) return st;
  s->version_ = kv["PULSAR_VERSION"];
  const std::string web = kv["PULSAR_WEB"];
  const auto colon = web.rfind(':');
  if (colon == std::string::npos) return internal_error("broker.sh printed no PULSAR_WEB");
  s->web_port_ = static_cast<std::uint16_t>(std::stoi(web.substr(colon + 1)));
  if (!tls_dir.empty()) {
    const std::string https = kv["PULSAR_WEB_TLS"];
    const auto c = https.rfind(':');
    if (c == std::string::npos) return internal_error("broker.sh printed no PULSAR_WEB_TLS");
    s->tls_port_ = static_cast<std::uint16_t>(std::stoi(https.substr(c + 1)));
  }
  return s;
}

PulsarServer& PulsarServer::shared() {
  static std::unique_ptr<PulsarServer> server = [] {
    const auto fail = [](const std::string& why) {
      std::fprintf(stderr, "cannot start Pulsar: %s\n", why.c_str());
      std::abort();
    };
    std::string dir = (std::filesystem::temp_directory_path() / "idem-pulsar-tls-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) fail("no folder for its certificates");
    std::string error;
    auto files = test_support::make_tls_files(dir, &error);
    if (!files) fail(error);
    auto s = start("127.0.0.1", dir);
    if (!s.ok()) fail(s.status().to_string());
    (*s)->tls_ = std::move(files);
    (*s)->tls_dir_ = dir;
    return std::move(s).value();
  }();
  return *server;
}

PulsarServer::~PulsarServer() {
  if (!dir_.empty()) (void)run_script("stop '" + dir_ + "' >&2", nullptr);
  std::error_code ignored;
  if (!tls_dir_.empty()) std::filesystem::remove_all(tls_dir_, ignored);
}

Status PulsarServer::restart(bool kill) {
  return run_script(std::string("restart '") + dir_ + "'" + (kill ? " --kill" : ""), nullptr);
}

std::string PulsarServer::uri(const std::string& topic, const std::string& sub, const std::string& params) const {
  std::string u = "pulsar-ws://" + address_ + ":" + std::to_string(web_port_) + "/public/default/" + topic;
  std::string q = sub.empty() ? "" : "subscription=" + sub;
  if (!params.empty()) q += (q.empty() ? "" : "&") + params;
  return q.empty() ? u : u + "?" + q;
}

int PulsarServer::admin(const std::string& method, const std::string& path, std::string* body,
                        const std::string& request) const {
  std::string answer;
  auto code = pulsar::detail::http_request(Endpoint{address_, web_port_, ""}, method, path, request, &answer, kTimeout);
  if (body != nullptr) *body = answer;
  return code.ok() ? *code : -1;
}

Status PulsarServer::unload(const std::string& topic) const {
  std::string body;
  const int code = admin("PUT", "/admin/v2/persistent/public/default/" + topic + "/unload", &body);
  if (code / 100 != 2) return unavailable("unload " + topic + ": HTTP " + std::to_string(code) + " " + body);
  return ok_status();
}

std::pair<std::int64_t, std::int64_t> PulsarServer::backlog(const std::string& topic, const std::string& sub) const {
  std::string body;
  if (admin("GET", "/admin/v2/persistent/public/default/" + topic + "/stats", &body) != 200) return {-1, -1};
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("subscriptions") || !j["subscriptions"].contains(sub)) return {-1, -1};
  const auto& s = j["subscriptions"][sub];
  return {s.value("msgBacklog", std::int64_t{-1}), s.value("unackedMessages", std::int64_t{0})};
}

std::vector<StoredMessage> PulsarServer::read_all(const std::string& topic, std::chrono::milliseconds quiet) const {
  std::vector<StoredMessage> out;
  auto ws = WebSocket::connect(Endpoint{address_, web_port_, ""},
                               "/ws/v2/reader/persistent/public/default/" + topic + "?messageId=earliest", kTimeout);
  if (!ws.ok()) return out;
  std::string frame;
  for (;;) {
    auto r = (*ws)->read(&frame, quiet);
    if (!r.ok() || !*r) break;
    auto j = nlohmann::json::parse(frame, nullptr, false);
    if (!j.is_object() || !j.contains("payload")) continue;
    out.push_back(stored(j));
    (void)(*ws)->write(nlohmann::json{{"messageId", j.value("messageId", std::string())}}.dump(), kTimeout);
  }
  return out;
}

}  // namespace idem::pulsar_test
