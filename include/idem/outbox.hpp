// The transactional outbox (docs/design.md §10, docs/outbox.md): what a handler
// publishes with HandlerContext::publish is written into the store in the same
// transaction as the dedup record and the handler's own writes, and sent after the
// commit by the consumer's dispatcher, through the Publisher that
// OutboxOptions::publishers opens for the destination.
//
// The store side is five things a backend implements (Store::outbox() non-null):
//   1. every commit form writes CommitRequest::outbox with the record, atomically;
//   2. OutboxStore::outbox_pending lists unsent entries (all, or one incoming id's);
//   3. OutboxStore::outbox_mark_sent marks entries sent, expiring at now + ttl (or removes
//      them at once);
//   4. Store::purge_expired also removes sent entries past their expiry (or the
//      backend expires them by itself, as it does its records);
//   5. a claim of a completed id with ClaimRequest::check_outbox sets
//      ClaimResult::outbox_unsent iff the id has unsent entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/status.hpp"

namespace idem {

// One outgoing message of the outbox. (incoming_id, position) is its key in a store.
struct OutboxEntry {
  std::string incoming_id;     // the id of the message whose handler published it
  std::uint32_t position = 0;  // its place in that handler's output, from 0
  std::string destination;     // the URI given to publish(); chooses the publisher
  // message.id is outgoing_id(incoming_id, position); body and headers as published.
  OutgoingMessage message;
  TimePoint created_at;  // the commit's `now`
};

// The id of the position-th message (from 0) that the handler of incoming message
// `incoming_id` published: incoming_id + "#" + the position in decimal, e.g.
// "order-7#0". Deterministic, so a resend carries the same id and a downstream
// consumer (idem, or the broker's own deduplication) drops it; and injective, since
// the incoming id is what precedes the last '#'. An outgoing id is at most
// 11 bytes longer than the incoming one: a downstream idem consumer needs its
// max_id_bytes to allow that.
std::string outgoing_id(std::string_view incoming_id, std::uint32_t position);

// Which unsent entries Store::outbox_pending returns.
struct OutboxQuery {
  // Set: only this incoming message's entries. Unset: every incoming message's.
  std::optional<std::string_view> incoming_id;
  // Only entries with created_at <= this (default: any).
  TimePoint created_up_to = TimePoint::max();
  std::size_t max = 256;  // at most this many; REQUIRES: > 0
};

// Headers as one byte string, for stores that keep them in one column: for each
// header, its name and its value, each as a 4-byte little-endian length followed by
// the bytes. decode_headers returns nullopt for bytes not in that form.
std::string encode_headers(const std::vector<std::pair<std::string, std::string>>& headers);
std::optional<std::vector<std::pair<std::string, std::string>>> decode_headers(std::string_view bytes);

// Opens a publisher for a destination URI, e.g. idem::open_publisher
// (idem/open_source.hpp: a factory over the adapters a build has; the core links none). Called from the
// consumer's threads, possibly from several at once; the consumer keeps the
// publishers it returns for reuse, each used by one thread at a time, and drops one
// whose publish() failed.
using PublisherFactory = std::function<StatusOr<std::unique_ptr<Publisher>>(const std::string& destination)>;

// ConsumerOptions::outbox.
struct OutboxOptions {
  // Null (default): no outbox; HandlerContext::publish answers kFailedPrecondition.
  // Set: requires a store with an outbox, Store::outbox(), and
  // ConsumerOptions::transactional, unless only ordering.dead_letter_to uses it (then
  // HandlerContext::publish still answers kFailedPrecondition); Consumer::create
  // answers kInvalidArgument otherwise.
  PublisherFactory publishers;
  // Messages per Publisher::publish call (and per "sent" update) at most; default 256.
  // REQUIRES: > 0.
  std::size_t dispatch_batch = 256;
  // ms; tick() and process() resend entries left unsent this long (a dispatch that
  // failed, a process that died before it); the first of those calls after start-up
  // resends every unsent entry at once. Default 5 s. REQUIRES: > 0.
  Duration resend_after{5000};
};

}  // namespace idem
