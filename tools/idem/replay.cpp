#include "replay.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "builtin_handler.hpp"
#include "exit_codes.hpp"
#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "replay_output.hpp"
#include "trace_line.hpp"

namespace idem::cli {
namespace {

// The logical clock starts at at_ms = 0 and is set by every line that has at_ms.
constexpr std::int64_t kClockOriginMs = 0;

int fail(std::ostream& err, int code, const std::string& message) {
  err << "idem replay: " << message << '\n';
  return code;
}

}  // namespace

int run_replay(const ConsumerSettings& settings, std::istream& in, std::ostream& out, std::ostream& err) {
  auto clock = std::make_shared<ManualClock>(from_unix_ms(kClockOriginMs));
  ConsumerOptions o = consumer_options_from(settings);
  o.owner = std::string(kReplayOwner);
  o.clock = clock;
  auto handler = std::make_shared<BuiltinHandler>();
  // Messages drained from the reorder buffer: their effects count once committed.
  o.on_buffered = [handler](const BufferedOutcome& b) {
    if (b.decision.reason == Reason::kProcessed) handler->mark_drained_committed(b.id);
  };
  std::string error;
  if (int rc = open_consumer_store(settings, o, error); rc != kExitOk) return fail(err, rc, error);

  auto consumer =
      Consumer<TraceLine>::create(std::move(o), trace_extractors(),
                                  [handler](const TraceLine& m, HandlerContext& ctx) { return (*handler)(m, ctx); });
  if (!consumer.ok()) return fail(err, kExitUsage, consumer.status().message());

  ReplayWriter writer(out);
  std::string text;
  std::uint64_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    const ParsedLine parsed = parse_trace_line(text);
    const TraceLine& m = parsed.line;
    if (!parsed.ok()) {
      writer.bad_line(line_no, m.id, parsed.error);
    } else {
      if (m.at_ms) clock->set(from_unix_ms(static_cast<std::int64_t>(*m.at_ms)));
      if (m.reset) {
        consumer->reset_watermark(*m.stream, *m.position);
        writer.decision(line_no, m.id, Decision::ack(Reason::kReset));
      } else {
        const Decision d = consumer->process(m);
        if (d.action == Action::kAck && d.reason == Reason::kProcessed) handler->mark_direct_committed();
        for (const Effect& e : handler->take_committed()) writer.effect(e);
        writer.decision(line_no, m.id, d);
        if (d.reason == Reason::kStoreUnavailable) {
          out.flush();
          return fail(err, kExitFailure, "store failed at line " + std::to_string(line_no) + ": " + d.detail);
        }
      }
    }
    if (settings.flush_every_line) out.flush();
  }
  out.flush();
  if (in.bad()) return fail(err, kExitFailure, "error reading the trace after line " + std::to_string(line_no));
  if (!out) return fail(err, kExitFailure, "error writing the output");
  return kExitOk;
}

}  // namespace idem::cli
