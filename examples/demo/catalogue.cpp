#include "catalogue.hpp"

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/idem.hpp"
#include "idem/machine_dsl.hpp"
#include "idem/machine_gate.hpp"
#include "idem/open_store.hpp"
#include "report.hpp"

namespace demo {
namespace {

// One status event of a product, as the partner publishes it.
struct StatusEvent {
  std::string id;         // the partner's event id
  std::string product;    // the entity key
  std::uint64_t seq = 0;  // the partner's version of the product, from 1
  std::string event;      // online, offline, delete
};

idem::Extractors<StatusEvent> status_extractors() {
  idem::Extractors<StatusEvent> x;
  x.id = [](const StatusEvent& e) { return std::optional<std::string_view>(e.id); };
  x.key = [](const StatusEvent& e) { return std::optional<std::string_view>(e.product); };
  x.version = [](const StatusEvent& e) { return std::optional<std::uint64_t>(e.seq); };
  x.event = [](const StatusEvent& e) { return std::optional<std::string_view>(e.event); };
  // Buffered events are stored in the SQLite file as "id product seq event".
  x.encode = [](const StatusEvent& e) { return e.id + ' ' + e.product + ' ' + std::to_string(e.seq) + ' ' + e.event; };
  x.decode = [](std::string_view s) -> std::optional<StatusEvent> {
    StatusEvent e;
    char id[64], product[64], event[64];
    unsigned long long seq = 0;
    const std::string text(s);
    if (std::sscanf(text.c_str(), "%63s %63s %llu %63s", id, product, &seq, event) != 4) return std::nullopt;
    return StatusEvent{id, product, seq, event};
  };
  return x;
}

// The product machine of docs/design.md §6 (examples/machines/product.yaml), in C++.
std::optional<idem::TransitionTable> product_machine() {
  using namespace idem::dsl;
  idem::BuildResult r = idem::Machine("product")
                            .initial("offline")
                            .final_states({"deleted"})
                            .max_retries(5)
                            .rows({
                                state("offline") + event("online") = state("online"),
                                state("online") + event("offline") = state("offline"),
                                row({"online", "offline"}, "delete", "deleted"),
                            })
                            .build();
  if (!r.ok()) {
    std::fprintf(stderr, "idem_demo: %s", r.format(idem::Severity::kError).c_str());
    return std::nullopt;
  }
  return std::move(*r.table);
}

void print_row(std::string_view note, const StatusEvent& e, const idem::Decision& d) {
  std::printf("  %-46s %-4s v%-3llu %-8s %-12s %s\n", std::string(note).c_str(), e.product.c_str(),
              static_cast<unsigned long long>(e.seq), e.event.c_str(), std::string(idem::action_name(d.action)).c_str(),
              std::string(idem::reason_name(d.reason)).c_str());
}

}  // namespace

bool catalogue(const std::string& db_path, const std::shared_ptr<idem::ManualClock>& clock) {
  print_chapter("Chapter 3: a partner's product statuses, out of order",
                "Strict ordering per product: an early version waits in the store's reorder buffer\n"
                "(acked once it is on disk) and runs when the gap fills. The product state machine\n"
                "rejects transitions the table does not allow; state and version change only in the commit.");
  auto table = product_machine();
  auto store = idem::open_store("sqlite:" + db_path);
  if (!table || !store.ok()) return false;

  std::map<std::string, std::vector<std::string>> applied;  // product → "from→to (vN)"
  std::vector<std::string> dead_letters;
  idem::ConsumerOptions o;
  o.store = std::move(store).value();
  o.clock = clock;
  o.ordering.mode = idem::Ordering::kStrict;
  o.machine = idem::machine_gate(std::move(*table));
  std::vector<idem::BufferedOutcome> left_buffer;  // printed after the delivery that caused it
  o.on_buffered = [&](const idem::BufferedOutcome& b) {
    left_buffer.push_back(b);
    if (b.decision.action == idem::Action::kDeadLetter) dead_letters.push_back(b.id);
  };
  auto consumer = idem::Consumer<StatusEvent>::create(
      std::move(o), status_extractors(), [&](const StatusEvent& e, idem::HandlerContext& ctx) {
        applied[e.product].push_back(std::string(ctx.from()) + "->" + std::string(ctx.to()) + " (v" +
                                     std::to_string(ctx.version()) + ")");
        return idem::HandlerResult::ok();
      });
  if (!consumer.ok()) {
    std::fprintf(stderr, "idem_demo: %s\n", consumer.status().to_string().c_str());
    return false;
  }

  std::printf("  %-46s %-4s %-4s %-8s %-12s %s\n", "delivery", "key", "ver", "event", "action", "reason");
  const std::vector<std::pair<const char*, StatusEvent>> deliveries = {
      {"p1 goes online again (arrives first)", {"e3", "p1", 3, "online"}},
      {"p1 goes offline (arrives second)", {"e2", "p1", 2, "offline"}},
      {"p1 comes online (its first version)", {"e1", "p1", 1, "online"}},
      {"the broker redelivers e2", {"e2", "p1", 2, "offline"}},
      {"the partner replays an old version of p1", {"e1-replay", "p1", 1, "online"}},
      {"p2 is deleted", {"e4", "p2", 1, "delete"}},
      {"p2 goes online after its deletion", {"e5", "p2", 2, "online"}},
  };
  std::map<std::string, idem::Decision> decided;
  for (const auto& [note, e] : deliveries) {
    const idem::Decision d = consumer->process(e);
    print_row(note, e, d);
    for (const idem::BufferedOutcome& b : left_buffer) {
      std::printf("  %-46s %-4s v%-3llu %-8s %-12s %s\n", "  ...then, from the reorder buffer", b.key.c_str(),
                  static_cast<unsigned long long>(b.version), "",
                  std::string(idem::action_name(b.decision.action)).c_str(),
                  std::string(idem::reason_name(b.decision.reason)).c_str());
    }
    left_buffer.clear();
    if (d.action == idem::Action::kDeadLetter) dead_letters.push_back(e.id);
    decided[e.id] = d;
  }
  std::printf("\n");
  print_metrics(consumer->metrics().snapshot());

  Audit audit;
  const std::vector<std::string> p1 = {"offline->online (v1)", "online->offline (v2)", "offline->online (v3)"};
  audit.check(applied["p1"] == p1, "p1's three versions applied once each, in order, whatever the arrival order");
  audit.check(applied["p2"] == std::vector<std::string>{"offline->deleted (v1)"}, "p2 deleted once");
  audit.check(decided["e3"].reason == idem::Reason::kBuffered && decided["e2"].reason == idem::Reason::kDuplicate,
              "early versions were buffered; the redelivered one was a duplicate");
  audit.check(decided["e1-replay"].reason == idem::Reason::kStale, "the replayed old version was dropped as stale");
  audit.check(dead_letters == std::vector<std::string>{"e5"},
              "only e5 was dead-lettered (online is never valid after delete)");
  auto p1_record = consumer->options().store->entities()->read_entity("p1");
  audit.check(p1_record.ok() && p1_record->version == 3 && p1_record->state == "online",
              "the store says p1 is at version 3, online");
  return audit.print("audit of the catalogue:");
}

}  // namespace demo
