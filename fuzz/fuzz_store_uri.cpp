// Fuzz target: store and broker URIs of every scheme — StoreUri::parse, each store's
// parse_uri (memory:, sqlite:, rocksdb:, bloom:, bloom+…:, redis://) and the Redis
// Streams adapter's redis-stream:// parser. Nothing is opened or connected. Any text
// parses or gets a message; a password a parser accepts never survives redact_uri().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "idem/bloom_store.hpp"
#include "idem/memory_store.hpp"
#include "idem/redis_store.hpp"
#include "idem/redis_stream_source.hpp"
#include "idem/rocksdb_store.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/store_uri.hpp"

namespace {

// Occurrences of `what` in `text`.
std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string_view::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// A password the parsers took from uri must not be printed by redact_uri(uri), nor by
// scrub_secrets() of a message that quotes uri and the password. Only passwords of 4
// bytes or more written once in the URI are checked: a shorter or repeated one may
// also be the text of the host, port or path, which stay; and none holding "***",
// which the redacted text may spell again around its own "***".
void check_redacted(std::string_view uri, const std::string& password) {
  if (password.size() < 4 || count(uri, password) != 1 || password.find("***") != std::string::npos) return;
  IDEM_FUZZ_CHECK(idem::redact_uri(uri).find(password) == std::string::npos);
  const std::string message = "cannot open \"" + std::string(uri) + "\": AUTH " + password + " refused";
  IDEM_FUZZ_CHECK(idem::scrub_secrets(message, uri).find(password) == std::string::npos);
}

void check_message(const idem::Status& s) {
  IDEM_FUZZ_CHECK(!s.ok());
  IDEM_FUZZ_CHECK(!s.message().empty());
}

template <class T>
void expect_parsed_or_message(const idem::StatusOr<T>& r) {
  if (!r.ok()) check_message(r.status());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view uri(reinterpret_cast<const char*>(data), size);
  (void)idem::redact_uri(uri);
  auto stream = idem::redis_streams::parse_uri(uri);
  expect_parsed_or_message(stream);
  if (stream.ok()) check_redacted(uri, stream->password);

  auto u = idem::StoreUri::parse(uri);
  if (!u.ok()) {
    check_message(u.status());
    return 0;
  }
  IDEM_FUZZ_CHECK(!u->scheme.empty());
  // Every scheme's parser sees every URI under its own scheme, whatever was written.
  idem::StoreUri any = *u;
  for (const char* scheme : {"memory", "sqlite", "rocksdb", "bloom", "redis"}) {
    any.scheme = scheme;
    if (any.scheme == "memory") expect_parsed_or_message(idem::memory::open(any));
    if (any.scheme == "sqlite") expect_parsed_or_message(idem::sqlite::parse_uri(any));
    if (any.scheme == "rocksdb") expect_parsed_or_message(idem::rocksdb::parse_uri(any));
    if (any.scheme == "bloom") {
      expect_parsed_or_message(idem::bloom::parse_uri(any));
      idem::bloom::Options filter;
      if (idem::Status s = idem::bloom::parse_filter_params(any, filter); !s.ok()) check_message(s);
    }
    if (any.scheme == "redis") {
      auto r = idem::redis::parse_uri(any);
      expect_parsed_or_message(r);
      if (r.ok() && u->scheme == "redis") check_redacted(uri, r->password);
    }
  }
  return 0;
}
