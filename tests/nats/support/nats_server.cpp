#include "support/nats_server.hpp"

#include <nats/nats.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "support/child_process.hpp"

namespace idem::nats_test {
namespace {

namespace fs = std::filesystem;
using test_support::spawn;

// A short-lived client connection with its JetStream context.
class Client {
 public:
  explicit Client(const NatsServer& s, const ServerConfig& c) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    const std::string url = "nats://" + c.address + ":" + std::to_string(s.port());
    natsOptions_SetURL(o, url.c_str());
    if (!c.user.empty()) natsOptions_SetUserInfo(o, c.user.c_str(), c.password.c_str());
    if (!c.token.empty()) natsOptions_SetToken(o, c.token.c_str());
    if (!c.nkey.empty()) natsOptions_SetNKeyFromSeed(o, c.nkey.c_str(), c.nkey_seed_file.c_str());
    if (!c.creds_file.empty()) natsOptions_SetUserCredentialsFromFiles(o, c.creds_file.c_str(), nullptr);
    if (!c.tls_cert.empty()) {  // as a client of its own CA, with the server's certificate
      natsOptions_SetSecure(o, true);
      natsOptions_LoadCATrustedCertificates(o, c.tls_ca.empty() ? c.tls_cert.c_str() : c.tls_ca.c_str());
      if (c.tls_ca.empty()) natsOptions_SkipServerVerification(o, true);
      if (c.tls_verify) natsOptions_LoadCertificatesChain(o, c.tls_cert.c_str(), c.tls_key.c_str());
    }
    natsOptions_SetTimeout(o, 500);
    natsOptions_SetAllowReconnect(o, false);
    status_ = natsConnection_Connect(&nc_, o);
    natsOptions_Destroy(o);
    if (status_ == NATS_OK) status_ = natsConnection_JetStream(&js_, nc_, nullptr);
  }
  ~Client() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (nc_ != nullptr) natsConnection_Destroy(nc_);
  }
  Status status() const {
    return status_ == NATS_OK ? ok_status() : unavailable(std::string("nats: ") + natsStatus_GetText(status_));
  }
  jsCtx* js() const { return js_; }

 private:
  natsStatus status_ = NATS_OK;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<NatsServer>> NatsServer::start(ServerConfig config) {
  static std::atomic<int> counter{0};
  std::unique_ptr<NatsServer> s(new NatsServer());
  s->config_ = std::move(config);
  s->dir_ = fs::temp_directory_path() /
            ("idem-nats-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  fs::remove_all(s->dir_);
  fs::create_directories(s->dir_);
  Status last = unavailable("no free port");
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = test_support::free_port();
    if (s->port_ == 0) continue;
    last = s->launch();
    if (last.ok()) return s;
  }
  return last;
}

NatsServer::~NatsServer() {
  kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string NatsServer::uri() const {
  const std::string auth = config_.user.empty() ? "" : config_.user + ":" + config_.password + "@";
  return "nats://" + auth + config_.address + ":" + std::to_string(port_);
}

Status NatsServer::launch() {
  std::vector<std::string> argv = {"nats-server", "-js",
                                   "-a",          config_.address,
                                   "-p",          std::to_string(port_),
                                   "-sd",         (dir_ / "js").string(),
                                   "-l",          (dir_ / "nats.log").string()};
  if (!config_.user.empty()) argv.insert(argv.end(), {"--user", config_.user, "--pass", config_.password});
  if (!config_.token.empty()) argv.insert(argv.end(), {"--auth", config_.token});
  if (!config_.nkey.empty() || !config_.operator_jwt.empty()) {
    const fs::path conf = dir_ / "nats.conf";
    std::ofstream f(conf);
    if (!config_.nkey.empty()) f << "authorization { users = [ { nkey: \"" << config_.nkey << "\" } ] }\n";
    if (!config_.operator_jwt.empty()) {
      f << "operator: \"" << config_.operator_jwt << "\"\nsystem_account: " << config_.system_public_key
        << "\nresolver: MEMORY\nresolver_preload: {\n  " << config_.system_public_key << ": \"" << config_.system_jwt
        << "\"\n  " << config_.account_public_key << ": \"" << config_.account_jwt << "\"\n}\n";
    }
    argv.insert(argv.end(), {"-c", conf.string()});
  }
  if (!config_.tls_cert.empty())
    argv.insert(argv.end(), {"--tls", "--tlscert", config_.tls_cert, "--tlskey", config_.tls_key});
  if (config_.tls_verify) argv.insert(argv.end(), {"--tlsverify", "--tlscacert", config_.tls_ca});
  pid_ = spawn(argv, dir_ / "stdout.log");
  if (pid_ < 0) return unavailable("fork failed");
  Status s = wait_ready(10'000);
  if (!s.ok()) kill();
  return s;
}

Status NatsServer::wait_ready(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = unavailable("not started");
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::ifstream log(dir_ / "nats.log");
      const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      return unavailable("nats-server on port " + std::to_string(port_) + " exited at start; its log ends:\n" +
                         text.substr(text.size() > 1500 ? text.size() - 1500 : 0));
    }
    Client c(*this, config_);
    last = c.status();
    if (last.ok()) {
      jsAccountInfo* ai = nullptr;
      const natsStatus s = js_GetAccountInfo(&ai, c.js(), nullptr, nullptr);
      if (s == NATS_OK) {
        jsAccountInfo_Destroy(ai);
        return ok_status();
      }
      last = unavailable(std::string("JetStream not ready: ") + natsStatus_GetText(s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return last;
}

void NatsServer::kill() {
  if (pid_ <= 0) return;
  test_support::reap(pid_, SIGKILL);
  pid_ = -1;
}

Status NatsServer::restart() {
  kill();
  return launch();
}

StatusOr<std::vector<StoredMessage>> NatsServer::messages(const std::string& stream) const {
  Client c(*this, config_);
  if (Status s = c.status(); !s.ok()) return s;
  jsStreamInfo* si = nullptr;
  if (js_GetStreamInfo(&si, c.js(), stream.c_str(), nullptr, nullptr) != NATS_OK) return std::vector<StoredMessage>{};
  const std::uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
  jsStreamInfo_Destroy(si);
  std::vector<StoredMessage> out;
  for (std::uint64_t seq = first; seq >= 1 && seq <= last; ++seq) {
    natsMsg* m = nullptr;
    if (js_GetMsg(&m, c.js(), stream.c_str(), seq, nullptr, nullptr) != NATS_OK) continue;  // deleted
    StoredMessage sm;
    sm.seq = seq;
    sm.subject = natsMsg_GetSubject(m);
    sm.body.assign(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)));
    const char** keys = nullptr;
    int n = 0;
    if (natsMsgHeader_Keys(m, &keys, &n) == NATS_OK) {
      for (int i = 0; i < n; ++i) {
        const char* v = nullptr;
        if (natsMsgHeader_Get(m, keys[i], &v) == NATS_OK && v != nullptr) sm.headers[keys[i]] = v;
      }
      free(keys);
    }
    natsMsg_Destroy(m);
    out.push_back(std::move(sm));
  }
  return out;
}

StatusOr<ConsumerCounts> NatsServer::consumer(const std::string& stream, const std::string& durable) const {
  Client c(*this, config_);
  if (Status s = c.status(); !s.ok()) return s;
  jsConsumerInfo* ci = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetConsumerInfo(&ci, c.js(), stream.c_str(), durable.c_str(), nullptr, &code);
  if (s != NATS_OK) return not_found("no durable " + durable + " on " + stream);
  ConsumerCounts counts{ci->NumAckPending, ci->NumPending, ci->NumRedelivered, ci->Config->AckWait / 1'000'000};
  jsConsumerInfo_Destroy(ci);
  return counts;
}

}  // namespace idem::nats_test
