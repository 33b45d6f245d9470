// Shared pieces of the Consumer<Msg> unit tests: a test message, its extractors, a
// harness with a ManualClock and a memory store, and a log capture.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "idem/consumer.hpp"
#include "idem/memory_store.hpp"

namespace idem {

// gtest printing of decisions in failure messages.
inline void PrintTo(const Decision& d, std::ostream* os) {
  *os << action_name(d.action) << "/" << reason_name(d.reason) << " delay=" << d.delay.count() << "ms";
  if (d.result) *os << " result=\"" << *d.result << "\"";
  if (!d.detail.empty()) *os << " detail=\"" << d.detail << "\"";
}

}  // namespace idem

namespace idem::test {

struct Msg {
  std::optional<std::string> id;
  std::optional<std::string> payload;
  std::optional<std::uint32_t> delivery_count;
  std::optional<TimePoint> received_at;
};

inline Msg msg(std::string id, std::optional<std::string> payload = std::nullopt) {
  Msg m;
  m.id = std::move(id);
  m.payload = std::move(payload);
  return m;
}

// Extractors for every field of Msg.
inline Extractors<Msg> all_extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) -> std::optional<std::string_view> {
    if (!m.id) return std::nullopt;
    return std::string_view(*m.id);
  };
  x.payload = [](const Msg& m) -> std::optional<std::string_view> {
    if (!m.payload) return std::nullopt;
    return std::string_view(*m.payload);
  };
  x.delivery_count = [](const Msg& m) { return m.delivery_count; };
  x.received_at = [](const Msg& m) { return m.received_at; };
  return x;
}

// Captures what the consumer logs, one line per message ("<level> <text>").
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    logger_ = std::make_shared<spdlog::logger>("idem-test", sink_);
    logger_->set_pattern("%l %v");
    logger_->set_level(spdlog::level::trace);
  }
  std::shared_ptr<spdlog::logger> logger() const { return logger_; }
  std::string text() const {
    logger_->flush();
    return out_.str();
  }
  // Returns how many lines contain `needle`.
  int count_lines(std::string_view needle) const {
    std::istringstream in(text());
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

class ConsumerTest : public ::testing::Test {
 protected:
  ConsumerOptions options(Guarantee g = Guarantee::kEffectivelyOnce) {
    ConsumerOptions o;
    o.guarantee = g;
    if (needs_dedup(g)) o.store = store_;
    o.clock = clock_;
    o.logger = log_.logger();
    o.owner = "test-owner";
    return o;
  }

  using Handler = Consumer<Msg>::Handler;

  Consumer<Msg> make(ConsumerOptions o, Handler h, Extractors<Msg> x = all_extractors()) {
    auto c = Consumer<Msg>::create(std::move(o), std::move(x), std::move(h));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) throw std::runtime_error("create failed: " + c.status().to_string());
    return std::move(c).value();
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_ = memory::open().value();
  LogCapture log_;
};

// Returns success iff d is action/reason; the failure prints the whole decision.
inline ::testing::AssertionResult is_decision(const Decision& d, Action action, Reason reason) {
  if (d.action == action && d.reason == reason) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << action_name(action) << "/" << reason_name(reason) << ", got "
                                       << ::testing::PrintToString(d);
}

// Requires the decision to be action/reason. Accepts << like other EXPECT_ macros.
#define EXPECT_DECISION(d, act, why) EXPECT_TRUE(::idem::test::is_decision((d), (act), (why)))

}  // namespace idem::test
