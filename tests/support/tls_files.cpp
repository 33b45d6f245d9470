#include "support/tls_files.hpp"

#include <fstream>
#include <iterator>
#include <vector>

#include "support/child_process.hpp"

namespace idem::test_support {
namespace {

// Runs openssl with `args`; false with its output in *error when it fails.
bool openssl(const std::filesystem::path& dir, std::vector<std::string> args, std::string* error) {
  args.insert(args.begin(), "openssl");
  const std::filesystem::path log = dir / "openssl.log";
  std::filesystem::remove(log);
  if (wait_exit(spawn(args, log)) == 0) return true;
  std::ifstream f(log);
  *error = "openssl " + args[1] + " failed: " + std::string(std::istreambuf_iterator<char>(f), {});
  return false;
}

// A new P-256 key and a certificate for `subject` signed by ca (self-signed when ca is
// empty), with `extensions` (an openssl extension file's lines) when not empty.
bool certificate(const std::filesystem::path& dir, const std::string& name, const std::string& subject,
                 const std::string& ca, const std::string& extensions, std::string* error) {
  const std::string key = (dir / (name + ".key")).string(), pem = (dir / (name + ".pem")).string();
  const std::vector<std::string> new_key{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                         "-keyout", key, "-subj", subject};
  if (ca.empty()) {
    std::vector<std::string> args{"req", "-x509", "-days", "2", "-out", pem};
    args.insert(args.end(), new_key.begin(), new_key.end());
    return openssl(dir, args, error);
  }
  const std::string csr = (dir / (name + ".csr")).string(), ext = (dir / (name + ".ext")).string();
  std::ofstream(ext) << extensions;
  std::vector<std::string> request{"req", "-out", csr};
  request.insert(request.end(), new_key.begin(), new_key.end());
  return openssl(dir, request, error) &&
         openssl(dir,
                 {"x509", "-req", "-in", csr, "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial", "-days",
                  "2", "-out", pem, "-extfile", ext},
                 error);
}

}  // namespace

std::optional<TlsFiles> make_tls_files(const std::filesystem::path& dir, std::string* error) {
  std::filesystem::create_directories(dir);
  const std::string ca = (dir / "ca").string();
  const std::string server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n";
  const std::string client_ext = "extendedKeyUsage=clientAuth\n";
  if (!certificate(dir, "ca", "/CN=idem-test-ca", "", "", error) ||
      !certificate(dir, "other-ca", "/CN=idem-other-ca", "", "", error) ||
      !certificate(dir, "server", "/CN=localhost", ca, server_ext, error) ||
      !certificate(dir, "client", "/CN=idem-client", ca, client_ext, error))
    return std::nullopt;
  // The server's key under a certificate for another name only.
  const std::string csr = (dir / "wrong-host.csr").string(), ext = (dir / "wrong-host.ext").string();
  std::ofstream(ext) << "subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth,clientAuth\n";
  const std::string server_key = (dir / "server.key").string();
  if (!openssl(dir, {"req", "-new", "-key", server_key, "-subj", "/CN=elsewhere.invalid", "-out", csr}, error) ||
      !openssl(dir,
               {"x509", "-req", "-in", csr, "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial", "-days", "2",
                "-out", (dir / "wrong-host.pem").string(), "-extfile", ext},
               error) ||
      !openssl(dir,
               {"pkcs8", "-topk8", "-in", (dir / "client.key").string(), "-out",
                (dir / "client-encrypted.key").string(), "-passout", std::string("pass:") + kClientKeyPassword},
               error))
    return std::nullopt;
  for (const char* key : {"ca.key", "other-ca.key", "server.key", "client.key", "client-encrypted.key"})
    std::filesystem::permissions(dir / key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const auto at = [&](const char* name) { return (dir / name).string(); };
  return TlsFiles{at("ca.pem"),     at("server.pem"), at("server.key"), at("wrong-host.pem"),
                  at("client.pem"), at("client.key"), at("client-encrypted.key"), at("other-ca.pem")};
}

}  // namespace idem::test_support
