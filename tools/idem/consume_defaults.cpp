#include "consume_defaults.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "idem/backend/store_uri.hpp"

namespace idem::cli {
namespace {

// FNV-1a, 64 bits, as 16 hex digits: a file name that two identities do not share.
std::string hash_hex(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// text with every byte outside [A-Za-z0-9.-] as '_', at most 60 of them.
std::string file_name_part(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 60)) out += std::isalnum(c) || c == '.' || c == '-' ? char(c) : '_';
  return out;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

StatusOr<std::string> state_directory() {
  std::filesystem::path dir;
  if (const char* systemd = env("STATE_DIRECTORY")) {
    dir = std::string(systemd).substr(0, std::string(systemd).find(':'));  // the first of several
  } else if (const char* xdg = env("XDG_STATE_HOME")) {
    dir = std::filesystem::path(xdg) / "idem";
  } else if (const char* home = env("HOME")) {
    dir = std::filesystem::path(home) / ".local/state/idem";
  } else {
    return failed_precondition("no state folder: set STATE_DIRECTORY, XDG_STATE_HOME or HOME, or give --store");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return failed_precondition("cannot create the state folder " + dir.string() + ": " + ec.message());
  return dir.string();
}

StatusOr<std::string> source_identity(const std::string& source) {
  auto u = StoreUri::parse(source);
  if (!u.ok()) return invalid_argument("--source: " + u.status().message());
  std::string_view rest = u->body;
  if (rest.starts_with("//")) rest.remove_prefix(2);
  (void)take_userinfo(&rest);
  std::string id = u->scheme + "://" + std::string(rest);
  for (const char* name : {"group", "durable", "subscription", "queue", "stream"})
    if (auto v = u->param(name)) id += std::string(id.find('?') == std::string::npos ? "?" : "&") + name + "=" + *v;
  return id;
}

StatusOr<std::string> default_store_uri(const std::string& source) {
  auto id = source_identity(source);
  if (!id.ok()) return id.status();
  auto dir = state_directory();
  if (!dir.ok()) return dir.status();
  // leases=shared: the consumers of one group on this host share the file.
  return "sqlite:" + *dir + "/consume-" + file_name_part(*id) + "-" + hash_hex(*id).substr(0, 8) +
         ".db?leases=shared";
}

StatusOr<std::string> take_consumer_name(const std::string& source) {
  auto id = source_identity(source);
  if (!id.ok()) return id.status();
  auto dir = state_directory();
  if (!dir.ok()) return dir.status();
  const std::filesystem::path folder = std::filesystem::path(*dir) / "consumers";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return failed_precondition("cannot create " + folder.string() + ": " + ec.message());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
  for (int n = 0; n < 1024; ++n) {
    const std::string path = (folder / (hash_hex(*id) + "." + std::to_string(n) + ".lock")).string();
    // Close-on-exec: the exec handler's children must not hold the lock.
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return failed_precondition("cannot open " + path);
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return std::string(host) + "-" + std::to_string(n);  // fd kept: the lock
    close(fd);
  }
  return failed_precondition("1024 consumers of one source on this host: give &consumer=NAME");
}

}  // namespace idem::cli
