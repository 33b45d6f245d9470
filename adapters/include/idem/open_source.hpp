// open_source(URI) and open_publisher(URI): one entry point over every broker adapter
// this build enabled, chosen by the URI's scheme (docs/adapters.md lists the forms).
// `idem consume --source` and `--outbox` use them; so can a program's Runtime and its
// outbox (ConsumerOptions::outbox.publishers = idem::open_publisher).
//
//   auto source = idem::open_source("redis-stream://127.0.0.1:6379/orders?group=g").value();
//   auto rt = idem::Runtime<Order>::create(ro, *source, consumer, decode_order).value();
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace idem {

// What a source takes from the consumer it feeds.
struct OpenSourceOptions {
  // ms; the consumer's lease (ConsumerOptions::lease). A broker's redelivery timeout
  // that idem sets (Redis Streams' claim timeout, NATS JetStream's AckWait) is this, so
  // the broker redelivers when the lease has run out. Default 30 s.
  Duration lease{30'000};
  // This process's name among the group's consumers, where the broker keeps state per
  // consumer (Redis Streams: its pending list, which a restart under the same name
  // takes back at once instead of waiting for the lease). Empty: the adapter's default
  // (unique per process). A `consumer=` in the URI wins.
  std::string consumer_name;
};

// Opens the source `uri` names:
//   redis-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM?group=G[&consumer=NAME][&db=N]
//   amqp://USER:PASSWORD@HOST:PORT/VHOST?queue=Q[&…]
//   nats://[USER:PASSWORD@]HOST:PORT?stream=S&durable=D[&…]
//   kafka://HOST:PORT[,HOST:PORT…]/TOPIC?group=G[&…]
//   pulsar-ws://HOST:WEB_PORT/TENANT/NAMESPACE/TOPIC?subscription=S[&…]
// of the adapters this build has. Returns kInvalidArgument for a malformed URI, a
// missing group, durable or subscription, or an unknown scheme (naming the forms this
// build knows); the adapter's error when the broker cannot be reached or refuses. No
// error message contains a password.
StatusOr<std::unique_ptr<MessageSource>> open_source(std::string_view uri, const OpenSourceOptions& options = {});

// Opens a publisher to the destination `uri` names: a source URI of the same forms,
// whose consumer parameters (group, durable, subscription) may be left out. Errors as
// open_source. Its signature is a PublisherFactory's (outbox.hpp).
StatusOr<std::unique_ptr<Publisher>> open_publisher(const std::string& uri);

// Deletes, on the broker, what open_source(uri) and open_publisher(uri) create: the
// stream, queue or topic, with the dead-letter and retry destinations the adapter
// keeps beside it, and every message in them. What does not exist counts as deleted.
// Errors as open_source. Meant for destinations made for a run, as `idem bench
// --source` makes them with with_destination_suffix().
Status remove_destination(std::string_view uri);

// `uri` with `suffix` appended to every destination name in it: the stream, queue or
// topic (in the path or the query) and the query's subject, dlq, dlq_stream and
// retry_topic. Consumer names (group, durable, subscription) are left as they are.
// kInvalidArgument for a URI of no form this build knows.
StatusOr<std::string> with_destination_suffix(std::string_view uri, std::string_view suffix);

// One line per URI form this build knows, each ending in '\n', for help texts.
std::string broker_uri_forms();

}  // namespace idem
