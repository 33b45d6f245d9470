#include "consume_run.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "consume_defaults.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/open_source.hpp"
#include "operator_session.hpp"
#include "tls_warning.hpp"

namespace idem::cli {
namespace {

constexpr int kExitSecondSignal = 130;

std::atomic<void*> g_target{nullptr};
std::atomic<void (*)(void*)> g_stop{nullptr};
std::atomic<int> g_signals{0};

void on_signal(int) {
  if (g_signals.fetch_add(1) > 0) _exit(kExitSecondSignal);
  void* target = g_target.load();
  void (*stop)(void*) = g_stop.load();
  if (target != nullptr && stop != nullptr) stop(target);
}

}  // namespace

int consume_fail(int code, const std::string& message) {
  std::cerr << "idem consume: " << message << '\n';
  return code;
}

int open_consume_source(const ConsumeArgs& a, const ConsumerSettings& s, std::unique_ptr<MessageSource>& out) {
  // A broker that cannot be reached at start (restarting, a lossy link) is tried again
  // for --source-wait-ms, 100 ms doubling to 2 s between tries, each failure on stderr.
  warn_if_tls_insecure("consume", a.source);
  warn_if_tls_insecure("consume", s.store_uri);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.source_wait_ms);
  OpenSourceOptions options{.lease = s.lease};
  const bool redis_stream = a.source.starts_with("redis-stream:") || a.source.starts_with("rediss-stream:");
  if (redis_stream && a.source.find("consumer=") == std::string::npos) {
    auto name = take_consumer_name(a.source);
    if (!name.ok()) return consume_fail(kExitFailure, scrub_secrets(name.status().message(), a.source));
    options.consumer_name = *name;
  }
  auto source = open_source(a.source, options);
  for (auto pause = std::chrono::milliseconds(100);
       !source.ok() && source.status().code() == StatusCode::kUnavailable &&
       std::chrono::steady_clock::now() + pause < give_up;
       pause = std::min(2 * pause, std::chrono::milliseconds(2000))) {
    std::cerr << "idem consume: "
              << scrub_secrets("cannot open source: " + source.status().to_string(), a.source) << "; trying again in "
              << pause.count() << " ms\n";
    std::this_thread::sleep_for(pause);
    source = open_source(a.source, options);
  }
  if (!source.ok() && source.status().code() == StatusCode::kInvalidArgument)
    return consume_fail(kExitUsage, scrub_secrets("--source: " + source.status().message(), a.source));
  if (!source.ok())
    return consume_fail(kExitFailure, scrub_secrets("cannot open source: " + source.status().to_string(), a.source));
  out = std::move(source).value();
  return kExitOk;
}

int choose_store(const ConsumeArgs& a, ConsumerSettings& s) {
  if (!needs_dedup(s.guarantee)) return kExitOk;
  if (s.store_given) {
    if (s.store_uri.starts_with("memory:"))
      std::cerr << "idem consume: warning: --store memory: keeps the records in this process only: after a "
                   "restart every message the broker sends again runs again\n";
    return kExitOk;
  }
  auto uri = default_store_uri(a.source);
  if (!uri.ok() && uri.status().code() == StatusCode::kInvalidArgument)
    return consume_fail(kExitUsage, scrub_secrets(uri.status().message(), a.source));
  if (!uri.ok()) return consume_fail(kExitFailure, uri.status().message());
  s.store_uri = *uri;
  std::cerr << "idem consume: no --store: the records are kept in " << s.store_uri << '\n';
  return kExitOk;
}

RuntimeOptions runtime_options(const ConsumeArgs& a) {
  RuntimeOptions ro;
  ro.workers = static_cast<std::size_t>(a.workers);
  ro.batch = static_cast<std::size_t>(a.batch);
  ro.idle_exit = Duration(a.idle_exit_ms);
  ro.max_messages = static_cast<std::uint64_t>(a.max_messages);
  ro.failure_actions_per_second = a.failure_actions_per_second;
  ro.failure_burst = static_cast<std::size_t>(a.failure_burst);
  return ro;
}

void warn_buffered(Store& store, const ConsumerSettings& s) {
  EntityStore* entities = store.entities();
  if (entities == nullptr || s.ordering.mode != Ordering::kStrict) return;
  auto summary = entities->buffer_summary(10);
  if (!summary.ok() || summary->count == 0) return;
  std::cerr << "idem consume: warning: " << summary->count
            << (summary->count == 1 ? " message waits" : " messages wait")
            << " in the reorder buffer for an earlier version that has not arrived; it runs when that version "
               "arrives, or the gap policy ("
            << gap_policy_name(s.ordering.gap_policy) << ") acts " << s.ordering.gap_timeout.count()
            << " ms after it was buffered (idem inspect --store URI shows them):\n";
  for (const BufferedKey& k : summary->keys)
    std::cerr << "  key " << json_text(k.key) << ": " << k.count << " buffered from version " << k.lowest_version
              << ", since " << iso_time(k.oldest_at) << '\n';
  if (summary->keys.size() == 10) std::cerr << "  (the 10 oldest keys shown)\n";
}

void set_stop_target(void* target, void (*stop)(void*)) {
  g_stop.store(stop);
  g_target.store(target);
  if (target == nullptr) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace idem::cli
