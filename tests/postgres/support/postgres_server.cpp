#include "support/postgres_server.hpp"

#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "support/child_process.hpp"

namespace idem::postgres_test {
namespace {

namespace fs = std::filesystem;
using test_support::wait_exit;

const fs::path kBin = "/usr/lib/postgresql/15/bin";

// The user to run the server as: none when not root, else `postgres`.
const passwd* server_user() { return ::geteuid() == 0 ? ::getpwnam("postgres") : nullptr; }

// fork + exec as the server user, output to `out`, killed when this process dies.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out) {
  test_support::SpawnOptions options;
  options.user = server_user();
  return test_support::spawn(argv, out, options);
}

void own(const fs::path& p) {
  if (const passwd* pw = server_user()) {
    if (::chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) std::cerr << "chown " << p << " failed\n";
  }
}

// The folder of a fresh cluster (initdb: trust authentication, user "idem"), made
// once under the temporary folder and reused by every server after it: initdb runs
// into a folder of its own, which is then renamed into place (a racing process's
// rename loses, and it uses the winner's).
StatusOr<fs::path> cluster_template(const fs::path& base) {
  const passwd* pw = server_user();
  const fs::path tmpl = base / ("idem-pg15-template-" + std::to_string(pw ? pw->pw_uid : ::geteuid()));
  std::error_code ec;
  if (fs::exists(tmpl / "PG_VERSION", ec)) return tmpl;
  const fs::path work = tmpl.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(work, ec);
  fs::create_directories(work);
  own(work);
  const pid_t init = spawn({(kBin / "initdb").string(), "-D", (work / "data").string(), "-U", "idem", "-A", "trust",
                            "--no-sync", "-E", "UTF8", "--no-instructions"},
                           work / "initdb.log");
  if (init < 0 || wait_exit(init) != 0)
    return unavailable("initdb failed (see " + (work / "initdb.log").string() + ")");
  fs::rename(work / "data", tmpl, ec);  // fails if another process got there first
  fs::remove_all(work, ec);
  if (!fs::exists(tmpl / "PG_VERSION", ec)) return unavailable("no cluster template at " + tmpl.string());
  return tmpl;
}

// Where servers live: /dev/shm (tmpfs: copying a cluster there costs a tenth of what
// it costs on disk) unless the server must flush to a disk (fsync on) or there is none.
fs::path base_dir(bool fsync) {
  std::error_code ec;
  const fs::path shm = "/dev/shm";
  if (!fsync && fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0) return shm;
  return fs::temp_directory_path();
}

}  // namespace

StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::start(ServerConfig config) {
  static std::atomic<int> counter{0};
  std::unique_ptr<PostgresServer> s(new PostgresServer());
  s->config_ = config;
  const fs::path base = base_dir(config.fsync);
  s->dir_ = base / ("idem-pg-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  s->sock_ = s->dir_ / "sock";
  fs::remove_all(s->dir_);
  fs::create_directories(s->sock_);
  own(s->dir_);
  own(s->sock_);
  // A copy of a cluster initdb made once per machine: initdb costs seconds, a copy
  // a fraction of one.
  auto tmpl = cluster_template(base);
  if (!tmpl.ok()) return tmpl.status();
  const pid_t copy = spawn({"/bin/cp", "-a", tmpl->string(), (s->dir_ / "data").string()}, s->dir_ / "initdb.log");
  if (copy < 0 || wait_exit(copy) != 0)
    return unavailable("copying " + tmpl->string() + " failed (see " + (s->dir_ / "initdb.log").string() + ")");
  if (!config.also_listen.empty()) {
    std::ofstream(s->dir_ / "data" / "pg_hba.conf", std::ios::app)
        << "host all all " << config.also_listen << "/24 trust\n";
  }
  if (!config.tls_cert.empty()) {
    if (Status t = s->configure_tls(); !t.ok()) return t;
  }
  Status last = unavailable("no free port");
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = test_support::free_port();
    if (s->port_ == 0) continue;
    last = s->launch();
    if (last.ok() && !config.tls_cert.empty()) {
      last = s->create_tls_users();
      if (!last.ok()) s->kill();
    }
    if (last.ok()) return s;
  }
  return last;
}

// Over the socket (trusted): user idem's password and the certificate user.
Status PostgresServer::create_tls_users() {
  const std::string sql = std::string("ALTER ROLE idem PASSWORD '") + kTlsPassword +
                          "'; CREATE ROLE \"idem-client\" LOGIN SUPERUSER;";
  const pid_t psql = spawn({(kBin / "psql").string(), "-q", "-h", sock_.string(), "-p", std::to_string(port_), "-U",
                            "idem", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql},
                           dir_ / "psql.log");
  if (psql < 0 || wait_exit(psql) != 0)
    return unavailable("psql failed (see " + (dir_ / "psql.log").string() + ")");
  return ok_status();
}

// The server's certificate, key and CA in the data folder (the key private to the
// server's user, as postgres demands), ssl=on, and pg_hba.conf for TLS only.
Status PostgresServer::configure_tls() {
  const fs::path data = dir_ / "data";
  std::error_code ec;
  for (const auto& [from, to] : {std::pair{config_.tls_cert, "server.crt"}, std::pair{config_.tls_key, "server.key"},
                                 std::pair{config_.tls_ca, "root.crt"}}) {
    if (!fs::copy_file(from, data / to, fs::copy_options::overwrite_existing, ec))
      return unavailable("cannot copy " + from + ": " + ec.message());
    own(data / to);
  }
  fs::permissions(data / "server.key", fs::perms::owner_read | fs::perms::owner_write, ec);
  std::ofstream(data / "postgresql.auto.conf", std::ios::app)
      << "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nssl_ca_file = 'root.crt'\n"
      << "password_encryption = 'scram-sha-256'\n";
  std::ofstream(data / "pg_hba.conf", std::ios::trunc)
      << "local all all trust\n"
      << "hostssl all idem 127.0.0.1/32 scram-sha-256\n"
      << "hostssl all idem-client 127.0.0.1/32 cert clientcert=verify-full\n"
      << "hostnossl all all 127.0.0.1/32 reject\n";
  return ok_status();
}

Status PostgresServer::launch() {
  pid_ = spawn({(kBin / "postgres").string(), "-D", (dir_ / "data").string(), "-p", std::to_string(port_), "-k",
                sock_.string(), "-c",
                "listen_addresses=127.0.0.1" + (config_.also_listen.empty() ? "" : "," + config_.also_listen), "-c", config_.fsync ? "fsync=on" : "fsync=off",
                "-c", config_.fsync ? "full_page_writes=on" : "full_page_writes=off", "-c", "max_connections=100", "-c",
                "shared_buffers=64MB"},
               dir_ / "server.log");
  if (pid_ < 0) return unavailable("fork failed");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return unavailable("postgres on port " + std::to_string(port_) + " exited at start (see " +
                         (dir_ / "server.log").string() + ")");
    }
    const pid_t ready = spawn({(kBin / "pg_isready").string(), "-q", "-h", "127.0.0.1", "-p", std::to_string(port_),
                               "-U", "idem", "-d", "postgres"},
                              dir_ / "isready.log");
    if (ready > 0 && wait_exit(ready) == 0) return ok_status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill();
  return unavailable("postgres did not become ready in 30 s (see " + (dir_ / "server.log").string() + ")");
}

PostgresServer::~PostgresServer() {
  kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void PostgresServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGQUIT);  // immediate shutdown: the children go with it
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

std::string PostgresServer::uri(const std::string& params) const {
  return "postgres://idem@127.0.0.1:" + std::to_string(port_) + "/postgres" + params;
}

std::vector<std::pair<std::string, std::string>> PostgresServer::connection() const {
  return {{"host", "127.0.0.1"}, {"port", std::to_string(port_)}, {"user", "idem"}, {"dbname", "postgres"}};
}

PostgresServer* shared_server() {
  static std::unique_ptr<PostgresServer> server = [] {
    auto s = PostgresServer::start();
    if (!s.ok()) {
      std::cerr << "cannot start a PostgreSQL server: " << s.status().to_string() << '\n';
      return std::unique_ptr<PostgresServer>();
    }
    return std::move(s).value();
  }();
  return server.get();
}

std::string fresh_schema() {
  static std::atomic<int> counter{0};
  return "t_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));
}

}  // namespace idem::postgres_test
