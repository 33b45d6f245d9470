#include "support/consume_kills.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <thread>

#include "support/temp_dir.hpp"
#include "support/idem_state.hpp"

namespace idem::consume_kills {
namespace {

constexpr int kKeys = 200;
constexpr int kVersionsPerKey = 85;  // 17,000 distinct messages
constexpr int kMalformed = 120;

void kill_now(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

struct Workload {
  std::vector<std::string> lines;   // what is published, in order
  std::set<std::string> valid_ids;  // each must have exactly one effect
  std::set<std::string> malformed;  // each must be dead-lettered exactly once
};

std::string line_for(int key, int version, bool fail) {
  std::string s = "{\"id\":\"k" + std::to_string(key) + "-v" + std::to_string(version) + "\",\"key\":\"k" +
                  std::to_string(key) + "\",\"version\":" + std::to_string(version) + ",\"payload\":\"p\"";
  if (fail) s += ",\"fail\":true";
  return s + "}";
}

// Keys interleaved at random; versions of a key mostly in order, some swapped with
// the next; 20% of the messages sent again later; malformed bodies in between.
// strict: a body without key and version is malformed; otherwise only non-JSON is.
class WorkloadMaker {
 public:
  WorkloadMaker(std::mt19937& rng, bool strict) : rng_(rng), strict_(strict), next_(kKeys, 1) {}

  Workload make() {
    while (static_cast<int>(w_.valid_ids.size()) < kKeys * kVersionsPerKey) {
      const int k = static_cast<int>(rng_() % kKeys);
      if (next_[k] > kVersionsPerKey) continue;
      add_versions(k);
      if (rng_() % 140 == 0 && odd_ < kMalformed) add_odd();
    }
    return std::move(w_);
  }

 private:
  void add_versions(int k) {
    const int v = next_[k]++;
    const bool swap = v < kVersionsPerKey && rng_() % 10 == 0;
    if (swap) ++next_[k];
    for (int ver : swap ? std::vector<int>{v + 1, v} : std::vector<int>{v}) {
      w_.lines.push_back(line_for(k, ver, rng_() % 30 == 0));
      w_.valid_ids.insert("k" + std::to_string(k) + "-v" + std::to_string(ver));
      sent_.push_back(w_.lines.back());
      if (rng_() % 5 == 0)
        w_.lines.push_back(sent_[sent_.size() - 1 - rng_() % std::min<std::size_t>(sent_.size(), 500)]);
    }
  }

  void add_odd() {  // a body without key and version, or not JSON
    const std::string n = std::to_string(odd_++);
    const std::string bad = rng_() % 2 ? "not json " + n : "{\"id\":\"nokey-" + n + "\"}";
    w_.lines.push_back(bad);
    if (strict_ || bad[0] != '{') {
      w_.malformed.insert(bad);
    } else {
      w_.valid_ids.insert("nokey-" + n);
    }
  }

  std::mt19937& rng_;
  const bool strict_;
  std::vector<int> next_;
  std::vector<std::string> sent_;
  int odd_ = 0;
  Workload w_;
};

std::vector<std::string> consume_args(Broker& broker, const Mode& mode, const KillOptions& o, const std::string& db) {
  std::vector<std::string> a{"consume",
                             "--source",
                             broker.source_uri(o.topic, o.group),
                             "--store",
                             "sqlite:" + db + "?leases=shared",
                             "--ordering",
                             mode.strict ? "strict" : "none",
                             "--batch",
                             mode.batch,
                             "--workers",
                             "4",
                             "--lease-ms",
                             o.lease_ms,
                             "--backoff-ms",
                             "20",
                             "--idle-exit-ms",
                             o.idle_exit_ms};
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  return a;
}

// The last `n` lines of the file at `path`, for a failure message: the test's folder
// is removed when it ends.
std::string tail_of(const std::string& path, std::size_t n) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

int kills_to_run(const KillOptions& o) {
  const char* env = std::getenv("IDEM_CONSUME_KILLS");
  return env ? std::max(o.kills, std::atoi(env)) : o.kills;
}

void check_effects(const std::string& db, const Workload& w, bool strict) {
  long long buffered = -1;
  const std::vector<EffectRow> effects = read_effects(db, &buffered);
  std::map<std::string, int> per_id;
  std::map<std::string, long long> last_version;
  for (const EffectRow& e : effects) {
    ++per_id[e.id];
    if (!strict) continue;
    EXPECT_EQ(e.version, last_version[e.key] + 1) << "key " << e.key << " out of order at " << e.id;
    last_version[e.key] = e.version;
  }
  std::size_t doubled = 0;
  std::set<std::string> ids;
  for (const auto& [id, n] : per_id) {
    doubled += n > 1 ? 1 : 0;
    ids.insert(id);
  }
  EXPECT_EQ(doubled, 0u) << "effects that happened more than once";
  EXPECT_EQ(ids, w.valid_ids) << "effects lost or invented";
  EXPECT_EQ(buffered, 0) << "the reorder buffer still holds messages";
}

std::chrono::milliseconds alive_for(const KillOptions& o, std::mt19937& rng) {
  const auto spread = static_cast<unsigned>(std::max<std::int64_t>(1, o.alive_spread.count()));
  return o.alive_min + std::chrono::milliseconds(rng() % spread);
}

// One consumer a round (once two), killed; then the last one, left to finish.
std::vector<pid_t> kill_rounds(const std::vector<std::string>& consume, const std::string& log, const KillOptions& o,
                               std::mt19937& rng) {
  const int kills = kills_to_run(o);
  for (int i = 0; i < kills; ++i) {
    const pid_t a = spawn_idem(consume, log);
    const pid_t b = i == kills / 2 ? spawn_idem(consume, log) : 0;  // once, two consumers of the group
    std::this_thread::sleep_for(alive_for(o, rng));
    kill_now(a);
    if (b != 0) kill_now(b);
    if (o.after_kill) o.after_kill(i);
  }
  return {spawn_idem(consume, log)};
}

// o.members consumers side by side; each round kills one at random and starts it
// again. The members alive at the end are left to finish.
std::vector<pid_t> churn(const std::vector<std::string>& consume, const std::string& log, const KillOptions& o,
                         std::mt19937& rng) {
  std::vector<pid_t> members;
  for (int m = 0; m < o.members; ++m) members.push_back(spawn_idem(consume, log));
  const int kills = kills_to_run(o);
  for (int i = 0; i < kills; ++i) {
    std::this_thread::sleep_for(alive_for(o, rng));
    pid_t& victim = members[rng() % members.size()];
    kill_now(victim);
    if (o.after_kill) o.after_kill(i);
    victim = spawn_idem(consume, log);
  }
  return members;
}

}  // namespace

void PrintTo(const Mode& m, std::ostream* os) { *os << m.name; }

pid_t spawn_idem(const std::vector<std::string>& args, const std::string& log, const test_support::Host* host) {
  const std::string& state = testing::idem_state_directory();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  setenv("STATE_DIRECTORY", state.c_str(), 1);
  if (host != nullptr && !host->enter().ok()) _exit(126);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  std::vector<char*> argv{const_cast<char*>(IDEM_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(IDEM_BINARY, argv.data());
  _exit(127);
}

int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill_now(pid);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<EffectRow> read_effects(const std::string& db_path, long long* buffered) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::vector<EffectRow> rows;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT id, key, version FROM idem_effects ORDER BY seq", -1, &st, nullptr);
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  while (sqlite3_step(st) == SQLITE_ROW) rows.push_back({text(0), text(1), sqlite3_column_int64(st, 2)});
  sqlite3_finalize(st);
  *buffered = -1;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM idem_buffer", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *buffered = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

namespace {

// Writes the workload to dir/in.jsonl and publishes it through `idem publish`.
void publish(Broker& broker, const KillOptions& o, const Workload& w, testing::TempDir& dir) {
  ASSERT_GE(w.lines.size(), 20'000u);
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (const std::string& l : w.lines) f << l << '\n';
  }
  const std::string log = dir.sub("consume.log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", broker.publish_uri(o.topic), dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(60)),
            0)
      << "idem publish failed; log: " << log;
}

// Waits for the consumers that end the run to exit by themselves, then checks every
// effect, the dead letters and what the broker still holds.
// What `a` holds beyond `b`, once per extra copy.
std::vector<std::string> difference(const std::multiset<std::string>& a, const std::multiset<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Every dead-letter record counted. Where the broker writes each once, exactly the
// malformed messages (each as often as it was published). Where a kill may make it
// write one again (dead_letters_may_repeat()), every malformed body at least once
// (never lost), nothing else, and at most once more per kill and the second consumer's
// round; the copies are printed as a figure.
void check_dead_letters(Broker& broker, const KillOptions& o, const Workload& w) {
  const std::multiset<std::string> dead = broker.dead_letter_bodies(o.topic);
  const std::multiset<std::string> expected(w.malformed.begin(), w.malformed.end());
  const std::set<std::string> distinct(dead.begin(), dead.end());
  const std::multiset<std::string> once(distinct.begin(), distinct.end());
  const std::size_t per_kill = broker.dead_letters_may_repeat() ? static_cast<std::size_t>(kills_to_run(o)) + 2 : 1;
  std::size_t over_bound = 0;
  for (const std::string& b : once) over_bound += dead.count(b) > expected.count(b) * per_kill ? 1 : 0;
  std::printf("dead letters: %zu records for %zu malformed messages (%zu copies; bound %zu a message)\n", dead.size(),
              expected.size(), dead.size() - std::min(dead.size(), expected.size()), per_kill);
  EXPECT_EQ(difference(once, expected), std::vector<std::string>{}) << "dead letters of no malformed message";
  EXPECT_EQ(difference(expected, dead), std::vector<std::string>{}) << "malformed messages without a dead letter";
  EXPECT_EQ(over_bound, 0u) << "dead letters written more often than the broker's bound";
}

void finish_and_check(Broker& broker, const Mode& mode, const KillOptions& o, const Workload& w,
                      const std::vector<std::pair<pid_t, std::string>>& last, const std::string& db) {
  for (const auto& [pid, log] : last) {
    const int rc = wait_exit(pid, o.final_timeout);
    ASSERT_EQ(rc, 0) << "the last consumers did not exit by themselves; the end of their log:\n" << tail_of(log, 40);
  }
  check_effects(db, w, mode.strict);
  check_dead_letters(broker, o, w);
  const std::int64_t unsettled = broker.unsettled(o.topic, o.group);
  if (unsettled != -1) {
    EXPECT_EQ(unsettled, 0) << "deliveries neither acked nor dead-lettered";
  }
}

// The lines of the file at `path` that hold `text`.
std::size_t lines_with(const std::string& path, const std::string& text) {
  std::ifstream f(path);
  std::size_t n = 0;
  for (std::string line; std::getline(f, line);) n += line.find(text) != std::string::npos ? 1 : 0;
  return n;
}

// `uri` with every 127.0.0.1 replaced by `address`.
std::string via(std::string uri, const std::string& address) {
  const std::string loopback = "127.0.0.1";
  for (std::size_t at = uri.find(loopback); at != std::string::npos; at = uri.find(loopback, at + address.size()))
    uri.replace(at, loopback.size(), address);
  return uri;
}

}  // namespace

std::string Broker::source_uri_from(const std::string& address, const std::string& topic, const std::string& group) {
  return via(source_uri(topic, group), address);
}

void run_kill_test(Broker& broker, const Mode& mode, const KillOptions& o) {
  testing::TempDir dir("consume-kills");
  std::mt19937 rng(20261201);
  const Workload w = WorkloadMaker(rng, mode.strict).make();
  ASSERT_NO_FATAL_FAILURE(publish(broker, o, w, dir));
  const std::string db = dir.sub("idem.db");
  const std::string log = dir.sub("consume.log");
  const std::vector<std::string> consume = consume_args(broker, mode, o, db);
  std::vector<std::pair<pid_t, std::string>> last;
  for (pid_t pid : o.members > 1 ? churn(consume, log, o, rng) : kill_rounds(consume, log, o, rng))
    last.emplace_back(pid, log);
  finish_and_check(broker, mode, o, w, last, db);
}

void run_partition_test(Broker& broker, const Mode& mode, const KillOptions& o, test_support::Host& host,
                        const PartitionOptions& p) {
  testing::TempDir dir("consume-partitions");
  std::mt19937 rng(20261206);
  const Workload w = WorkloadMaker(rng, mode.strict).make();
  ASSERT_NO_FATAL_FAILURE(publish(broker, o, w, dir));
  const std::string db = dir.sub("idem.db");
  const std::string log_there = dir.sub("there.log"), log_here = dir.sub("here.log");
  std::vector<std::string> there = consume_args(broker, mode, o, db);
  *(std::find(there.begin(), there.end(), "--source") + 1) = broker.source_uri_from(host.here(), o.topic, o.group);
  ASSERT_TRUE(host.lose(p.loss_percent).ok());
  const pid_t cut_off = spawn_idem(there, log_there, &host);
  // The other consumer starts once this one works: over a lossy link its connection
  // may take seconds (lost SYNs), in which the other would take the whole workload.
  const auto working_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (lines_with(log_there, "\"type\":\"effect\"") == 0 && std::chrono::steady_clock::now() < working_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t here = spawn_idem(consume_args(broker, mode, o, db), log_here);
  for (int i = 0; i < p.cuts; ++i) {
    std::this_thread::sleep_for(p.between);
    ASSERT_TRUE(host.cut().ok());
    std::this_thread::sleep_for(p.cut_for);
    ASSERT_TRUE(host.heal().ok());
  }
  finish_and_check(broker, mode, o, w, {{cut_off, log_there}, {here, log_here}}, db);
  const std::size_t applied_there = lines_with(log_there, "\"type\":\"effect\"");
  const std::size_t applied_here = lines_with(log_here, "\"type\":\"effect\"");
  EXPECT_GT(applied_there, 0u) << "the consumer on the host did nothing: the test cut an idle link";
  EXPECT_EQ(applied_there + applied_here, w.valid_ids.size()) << "effects committed but not printed, or twice";
  const std::size_t duplicates =
      lines_with(log_there, "\"reason\":\"duplicate\"") + lines_with(log_here, "\"reason\":\"duplicate\"");
  if (::testing::Test::HasFailure()) return;  // the line below states what the checks found
  std::printf("partition %s: %d cuts of %lld ms and %d%% packet loss (lease %s ms) between a consumer and its "
              "broker; %zu messages, %zu effects each once (%zu by the consumer on the host, %zu by the other), %zu "
              "duplicates absorbed, lost 0\n",
              p.label.c_str(), p.cuts, static_cast<long long>(p.cut_for.count()), p.loss_percent, o.lease_ms.c_str(),
              w.lines.size(), w.valid_ids.size(), applied_there, applied_here, duplicates);
}

}  // namespace idem::consume_kills
