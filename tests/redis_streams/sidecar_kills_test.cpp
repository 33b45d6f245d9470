// `idem consume --handler` under SIGKILLs (label kills): every message handled, and
// the handler called again only for what was in flight at a kill.
#include <cstdio>
#include <cstdlib>
#include <random>

#include "redis_streams/sidecar_support.hpp"

namespace idem::sidecar_test {
namespace {

// SIGKILLs at random moments, then a run until idle: every message handled, and the
// handler called again only for what was in flight at a kill (workers x batch each:
// the effect lives outside idem's transaction, so a call whose commit did not land
// runs again). Copies sent afterwards are duplicates carrying the stored result.
class SidecarKills : public SidecarBase, public ::testing::WithParamInterface<Kind> {
 protected:
  void SetUp() override { start(GetParam()); }
};

TEST_P(SidecarKills, EveryMessageIsHandledAndDuplicateCallsStayWithinWhatWasInFlight) {
  constexpr int kMessages = 2000, kKills = 4, kWorkers = 4;
  std::vector<std::string> lines;
  // 4 ms of work each: a run handles about 1,000 a second, so each kill lands mid-stream.
  for (int i = 0; i < kMessages; ++i) lines.push_back(R"({"id":"k-)" + std::to_string(i) + R"(","sleep_ms":4})");
  publish(lines);
  const std::vector<std::string> args{"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db"),
                                      "--handler", handler_->spec(), "--workers", std::to_string(kWorkers),
                                      "--lease-ms", "1000"};
  // IDEM_SEED=N replays a run's kill times; each run prints its seed.
  const char* seed_env = std::getenv("IDEM_SEED");
  const unsigned seed = seed_env != nullptr ? static_cast<unsigned>(std::strtoul(seed_env, nullptr, 10))
                                            : std::random_device{}();
  std::printf("sidecar kills: IDEM_SEED=%u\n", seed);
  SCOPED_TRACE("IDEM_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int k = 0; k < kKills; ++k) {
    const pid_t pid = spawn_idem(args, dir_.sub("kills.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 500));
    kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid, 30s), 128 + SIGKILL);
  }
  const std::size_t before_final = calls(handler_->log()).size();
  EXPECT_GT(before_final, 0u) << "the killed consumers handled nothing: the kills tested nothing";
  const std::string out = consume({"--workers", std::to_string(kWorkers), "--lease-ms", "1000"});
  const auto c = calls(handler_->log());
  std::size_t total = 0;
  for (const auto& [id, attempts] : c) total += attempts.size();
  EXPECT_EQ(c.size(), static_cast<std::size_t>(kMessages)) << "every message handled";
  const std::size_t duplicates = total - c.size(), bound = kKills * kWorkers;
  std::printf("SIDECAR_KILLS handler=%s messages=%d kills=%d handled_before_last_run=%zu duplicate_calls=%zu bound=%zu\n",
              GetParam().name, kMessages, kKills, before_final, duplicates, bound);
  EXPECT_LE(duplicates, bound);

  publish({R"({"id":"k-7","sleep_ms":4})"});
  const std::string again = consume();
  EXPECT_TRUE(has(again, R"("id":"k-7","action":"ack","reason":"duplicate","result":)")) << again;
}

INSTANTIATE_TEST_SUITE_P(Handlers, SidecarKills, ::testing::Values(Kind{"python", true}, Kind{"exec", false}),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace idem::sidecar_test
