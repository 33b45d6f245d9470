// Shared pieces of the ordering and state-machine tests: a message with an entity key,
// a version and an event; its extractors (with a codec for the reorder buffer); and a
// harness that records what the handler saw and what left the buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "idem/consumer.hpp"

namespace idem::test {

struct EntityMsg {
  std::string id;
  std::optional<std::string> key;
  std::optional<std::uint64_t> version;
  std::optional<std::string> event;
  std::optional<std::string> stream;
  std::optional<std::uint64_t> position;
};

inline EntityMsg versioned(std::string id, std::string key, std::uint64_t version) {
  EntityMsg m;
  m.id = std::move(id);
  m.key = std::move(key);
  m.version = version;
  return m;
}

inline EntityMsg evented(std::string id, std::string key, std::string event) {
  EntityMsg m;
  m.id = std::move(id);
  m.key = std::move(key);
  m.event = std::move(event);
  return m;
}

// "id|key|version|event" with '|' forbidden in the fields the tests use; "" for absent.
inline std::string encode_entity_msg(const EntityMsg& m) {
  return m.id + "|" + m.key.value_or("") + "|" + (m.version ? std::to_string(*m.version) : "") + "|" +
         m.event.value_or("");
}

inline std::optional<EntityMsg> decode_entity_msg(std::string_view s) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == '|') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  if (parts.size() != 4) return std::nullopt;
  auto text = [&](int i) { return parts[i].empty() ? std::nullopt : std::optional<std::string>(parts[i]); };
  std::optional<std::uint64_t> version;
  if (!parts[2].empty()) version = std::stoull(parts[2]);
  return EntityMsg{.id = parts[0], .key = text(1), .version = version, .event = text(3)};
}

inline Extractors<EntityMsg> entity_extractors() {
  Extractors<EntityMsg> x;
  auto text = [](const std::optional<std::string>& f) -> std::optional<std::string_view> {
    if (!f) return std::nullopt;
    return std::string_view(*f);
  };
  x.id = [](const EntityMsg& m) { return std::optional<std::string_view>(m.id); };
  x.key = [text](const EntityMsg& m) { return text(m.key); };
  x.version = [](const EntityMsg& m) { return m.version; };
  x.event = [text](const EntityMsg& m) { return text(m.event); };
  x.stream = [text](const EntityMsg& m) { return text(m.stream); };
  x.position = [](const EntityMsg& m) { return m.position; };
  x.encode = encode_entity_msg;
  x.decode = decode_entity_msg;
  return x;
}

// What the handler saw and what left the buffer. Thread-safe.
class Journal {
 public:
  struct Run {
    std::string id, key, from, to;
    std::uint64_t version = 0;
    bool drained = false;
  };

  // The handler: records the run; fails for ids in fail_ids.
  HandlerResult handle(const EntityMsg& m, HandlerContext& ctx) {
    std::lock_guard lock(mu_);
    if (fail_ids_.contains(m.id)) return HandlerResult::fail("told to fail");
    runs_.push_back({m.id, std::string(ctx.key()), std::string(ctx.from()), std::string(ctx.to()), ctx.version(),
                     ctx.drained()});
    return HandlerResult::ok();
  }
  void on_buffered(const BufferedOutcome& b) {
    std::lock_guard lock(mu_);
    outcomes_.push_back(b);
  }
  void fail(const std::string& id, bool on) {
    std::lock_guard lock(mu_);
    if (on) {
      fail_ids_.insert(id);
    } else {
      fail_ids_.erase(id);
    }
  }
  std::vector<Run> runs() const {
    std::lock_guard lock(mu_);
    return runs_;
  }
  std::vector<std::uint64_t> versions() const {
    std::lock_guard lock(mu_);
    std::vector<std::uint64_t> v;
    for (const Run& r : runs_) v.push_back(r.version);
    return v;
  }
  std::vector<BufferedOutcome> outcomes() const {
    std::lock_guard lock(mu_);
    return outcomes_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Run> runs_;
  std::vector<BufferedOutcome> outcomes_;
  std::set<std::string> fail_ids_;
};

// Makes a consumer over `o` that records into `j`. REQUIRES: j outlives the consumer.
inline StatusOr<Consumer<EntityMsg>> entity_consumer(ConsumerOptions o, Journal& j) {
  o.on_buffered = [&j](const BufferedOutcome& b) { j.on_buffered(b); };
  return Consumer<EntityMsg>::create(std::move(o), entity_extractors(),
                                     [&j](const EntityMsg& m, HandlerContext& ctx) { return j.handle(m, ctx); });
}

}  // namespace idem::test
