// Fuzz target: store and broker URIs of every scheme — StoreUri::parse, each store's
// parse_uri (memory:, sqlite:, rocksdb:, bloom:, bloom+…:, redis://, postgres://), the
// Redis Streams adapter's redis-stream://, the RabbitMQ adapter's amqp://, the NATS
// adapter's nats://, the Kafka adapter's kafka:// and the Pulsar adapter's pulsar-ws://
// parsers.
// Nothing is opened or connected. Any text parses or gets a message; a password a
// parser accepts never survives redact_uri().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "idem/bloom_store.hpp"
#include "idem/memory_store.hpp"
#ifdef IDEM_FUZZ_WITH_RABBITMQ
#include "idem/rabbitmq_source.hpp"
#endif
#ifdef IDEM_FUZZ_WITH_NATS
#include "idem/nats_source.hpp"
#endif
#ifdef IDEM_FUZZ_WITH_KAFKA
#include "idem/kafka_source.hpp"
#endif
#ifdef IDEM_FUZZ_WITH_PULSAR
#include "idem/pulsar_source.hpp"
#endif
#ifdef IDEM_FUZZ_WITH_POSTGRES
#include "idem/postgres_store.hpp"
#endif
#include "idem/backend/store_uri.hpp"
#include "idem/redis_store.hpp"
#include "idem/redis_stream_source.hpp"
#include "idem/rocksdb_store.hpp"
#include "idem/sqlite_store.hpp"

namespace {

// Occurrences of `what` in `text`.
std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string_view::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// True iff `password` is written once in uri, and there inside the user part (after
// "//", after the user name's ':' if any, and before the last '@' or "%40" ahead of
// the query) or as the whole value of a parameter whose name holds "password",
// "secret" or "token". Elsewhere (a host, a path, a user name, another parameter that
// happens to hold the same bytes) it is not a secret.
bool written_once_as_password(std::string_view uri, const std::string& password) {
  if (count(uri, password) != 1) return false;
  const std::size_t q = uri.find('?');
  const std::size_t p = uri.find(password);
  if (q != std::string_view::npos && p > q) {
    const std::string_view before = uri.substr(0, p), after = uri.substr(p + password.size());
    const std::size_t name = before.find_last_of("?&") + 1;
    const std::string_view pair = before.substr(name);  // "NAME="
    return idem::secret_name(pair) && pair.ends_with('=') && pair.find('=') == pair.size() - 1 &&
           (after.empty() || after.front() == '&');
  }
  const std::string_view head = uri.substr(0, q);
  const std::size_t slashes = head.find("//");
  std::size_t at = head.rfind('@');
  const std::size_t pct = head.rfind("%40");
  if (pct != std::string_view::npos && (at == std::string_view::npos || pct > at)) at = pct;
  if (slashes == std::string_view::npos || at == std::string_view::npos || p < slashes + 2 ||
      p + password.size() > at)
    return false;
  // After the user name, when there is one: a user name may spell the decoded password.
  const std::size_t colon = head.find(':', slashes + 2);
  return colon >= at || p > colon;
}

// A password the parsers took from uri must not be printed by redact_uri(uri), nor by
// scrub_secrets() of a message that quotes uri and the password. Only passwords of 4
// bytes or more written once, in the user part, are checked: a shorter one may also be
// the text of the host, port or path, which stay. Passwords holding a '*' are left
// out: the redacted text may spell them again around its own "***" (redaction adds
// only '*', so a password without one found there was not redacted).
void check_redacted(std::string_view uri, const std::string& password) {
  if (password.size() < 4 || password.find('*') != std::string::npos || !written_once_as_password(uri, password))
    return;
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
#ifdef IDEM_FUZZ_WITH_RABBITMQ
  auto amqp = idem::rabbitmq::parse_uri(uri);
  expect_parsed_or_message(amqp);
  // Without a user part the adapter's default credentials stand: not from the URI.
  if (amqp.ok() && amqp->password != idem::rabbitmq::Options{}.password) check_redacted(uri, amqp->password);
#endif
#ifdef IDEM_FUZZ_WITH_NATS
  auto nats = idem::nats::parse_uri(uri);
  expect_parsed_or_message(nats);
  if (nats.ok()) check_redacted(uri, nats->password);
#endif
#ifdef IDEM_FUZZ_WITH_KAFKA
  auto kafka = idem::kafka::parse_uri(uri);
  expect_parsed_or_message(kafka);
  if (kafka.ok()) {
    for (const auto& [name, value] : kafka->properties)
      if (idem::secret_name(name)) check_redacted(uri, value);
  }
#endif
#ifdef IDEM_FUZZ_WITH_PULSAR
  auto pulsar = idem::pulsar::parse_uri(uri);
  expect_parsed_or_message(pulsar);
  if (pulsar.ok()) check_redacted(uri, pulsar->token);
#endif

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
#ifdef IDEM_FUZZ_WITH_POSTGRES
  any.scheme = "postgres";
  auto pg = idem::postgres::parse_uri(any);
  expect_parsed_or_message(pg);
  if (pg.ok() && (u->scheme == "postgres" || u->scheme == "postgresql")) {
    for (const auto& [key, value] : pg->connection)
      if (key == "password") check_redacted(uri, value);
  }
#endif
  return 0;
}
