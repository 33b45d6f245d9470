// Certificates for the TLS tests, made per test binary with the openssl command: a CA,
// a server certificate for IP:127.0.0.1 and DNS:localhost, one for another name only,
// a client certificate (CN idem-client), all signed by the CA, and an unrelated
// second CA. Keys are P-256, unencrypted PKCS#8 PEM, except client_key_encrypted.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace idem::test_support {

struct TlsFiles {
  std::string ca;                // the CA's certificate (PEM)
  std::string server_cert;       // SAN IP:127.0.0.1, DNS:localhost
  std::string server_key;
  std::string wrong_host_cert;   // SAN DNS:elsewhere.invalid only, same key as server_key
  std::string client_cert;       // CN idem-client
  std::string client_key;
  std::string client_key_encrypted;  // client_key under kClientKeyPassword
  std::string other_ca;          // a CA that signed none of these
};

inline constexpr char kClientKeyPassword[] = "key-pass-hunter2";

// Writes the files into `dir` (created if absent). On failure returns nullopt and
// sets *error to the openssl command's output.
std::optional<TlsFiles> make_tls_files(const std::filesystem::path& dir, std::string* error);

}  // namespace idem::test_support
