// `idem consume --handler` against a real Redis and the handlers of examples/sidecar:
// each decides by the handler's answer and never calls it for a duplicate; a missing
// field is a bad message; an exec: child that dies is restarted and its answers are
// paired by id; /metrics and
// /healthz answer while it runs.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <set>

#include "redis_streams/sidecar_support.hpp"
#include "redis_streams/stream_broker.hpp"

namespace idem::sidecar_test {
namespace {

using redis_streams_test::field_values;


TEST_P(Sidecar, DecidesByTheAnswerAndNeverCallsTheHandlerForADuplicate) {
  publish({R"({"id":"o-1"})", R"({"id":"o-2","fail":true})", R"({"id":"o-3","reject":true})",
           R"({"id":"o-4","busy":true})", R"({"id":"o-1"})"});
  const std::string out = consume();
  EXPECT_TRUE(has(out, R"("id":"o-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-1","action":"ack","reason":"duplicate","result":)")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-2","action":"retry","reason":"handler_failed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-2","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-3","action":"dead_letter","reason":"handler_rejected")")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-4","action":"retry","reason":"retry_requested","delay_ms":1000)")) << out;
  EXPECT_TRUE(has(out, R"("id":"o-4","action":"ack","reason":"processed")")) << out;
  const auto c = calls(handler_->log());
  EXPECT_EQ(c.at("o-1"), std::vector<int>{1}) << "the duplicate never reached the handler";
  EXPECT_EQ(c.at("o-2"), (std::vector<int>{1, 2}));
  EXPECT_EQ(c.at("o-3"), std::vector<int>{1}) << "a rejection is not retried";
  EXPECT_EQ(c.at("o-4"), (std::vector<int>{1, 2}));
  EXPECT_EQ(field_values(*server_, "orders:dlq", "body"), std::multiset<std::string>{R"({"id":"o-3","reject":true})"});
}

TEST_P(Sidecar, FieldsComeFromPointersAndAMissingOneIsABadMessage) {
  publish({R"({"order":{"id":"p-1"},"account":"a","version":1})", R"({"order":{},"account":"a","version":2})"});
  const std::string out = consume({"--id", "/order/id", "--key", "/account", "--version", "/version"});
  EXPECT_TRUE(has(out, R"("id":"p-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("action":"dead_letter","reason":"bad_message","detail":"id (/order/id) is missing)")) << out;
  EXPECT_EQ(calls(handler_->log()).size(), 1u);
}

// An exec: child that exits without answering fails its message, which is retried
// by a new child.
TEST_F(ExecSidecar, AChildThatDiesIsReplacedAndItsMessageRetried) {
  publish({R"({"id":"c-1","crash":true})", R"({"id":"c-2"})"});
  const std::string out = consume({"--workers", "1"});
  EXPECT_TRUE(has(out, R"("id":"c-1","action":"retry","reason":"handler_failed","delay_ms":100,"detail":"the handler process exited)"))
      << out;
  EXPECT_TRUE(has(out, R"("id":"c-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"c-2","action":"ack","reason":"processed")")) << out;
  EXPECT_EQ(calls(handler_->log()).at("c-1"), (std::vector<int>{1, 2}));
}

// Answers are paired by the id they name, not by their place: a stray line on stdout
// is skipped (and shown on stderr), and an answer for another id replaces the child
// and sends the message once more. Every message ends with its own answer.
TEST_F(ExecSidecar, AnswersArePairedByTheirIdNotByTheirPlace) {
  publish({R"({"id":"d-1","debug":true})", R"({"id":"d-2"})", R"({"id":"w-1","wrong_id":true})", R"({"id":"w-2"})"});
  const std::string out = consume({"--workers", "1"});
  for (const char* id : {"d-1", "d-2", "w-1", "w-2"}) {
    const std::string own = std::string(R"("id":")") + id +
                            R"(","action":"ack","reason":"processed","result":"{\"handled\":\")" + id + R"(\"}")";
    EXPECT_TRUE(has(out, own)) << id << " did not end with its own answer\n" << out;
  }
  EXPECT_TRUE(has(out, "the exec handler wrote a line that is not an answer: debug: got d-1")) << out;
  EXPECT_FALSE(has(out, R"("action":"retry")")) << "nothing failed: " << out;
  const auto c = calls(handler_->log());
  EXPECT_EQ(c.at("d-1"), std::vector<int>{1});
  EXPECT_EQ(c.at("w-1"), (std::vector<int>{1, 1})) << "sent once more, to a new child, within the same attempt";
  EXPECT_EQ(c.at("w-2"), std::vector<int>{1});
}

// A handler three times slower than the lease, two consumers of the group: the
// source's keep_alive() claims each entry again while it runs, so the other consumer
// never takes it. Each message is called once, and no copy meets a lease (in_progress).
TEST_F(ExecSidecar, AHandlerSlowerThanTheLeaseRunsOnceAcrossTwoConsumers) {
  publish({R"({"id":"s-1","sleep_ms":3000})", R"({"id":"s-2","sleep_ms":3000})"});
  // b looks for entries to claim every 50 ms, a never again after its start.
  auto start = [&](const std::string& out, const std::string& claim_every) {
    return spawn_idem({"consume", "--source", stream() + "?group=g&claim_every_ms=" + claim_every, "--store",
                       "sqlite:" + dir_.sub("db") + "?leases=shared", "--handler", handler_->spec(), "--workers", "1",
                       "--lease-ms", "1000", "--handler-timeout-ms", "10000", "--idle-exit-ms", "2500"},
                      out);
  };
  const pid_t a = start(dir_.sub("a.log"), "600000");
  // b starts once a holds both entries (the group's pending list), checked, not slept on.
  std::int64_t pending = 0;
  for (const auto until = std::chrono::steady_clock::now() + 30s; pending < 2 && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(20ms)) {
    auto r = server_->command({"XPENDING", "orders", "g"});
    pending = r.ok() && !r->elements.empty() ? r->elements[0].integer : 0;
  }
  ASSERT_EQ(pending, 2) << "a did not fetch both entries; " << read_text(dir_.sub("a.log"));
  const pid_t b = start(dir_.sub("b.log"), "50");
  EXPECT_EQ(wait_exit(a, 60s), 0) << read_text(dir_.sub("a.log"));
  EXPECT_EQ(wait_exit(b, 60s), 0) << read_text(dir_.sub("b.log"));
  const auto c = calls(handler_->log());
  EXPECT_EQ(c.at("s-1"), std::vector<int>{1});
  EXPECT_EQ(c.at("s-2"), std::vector<int>{1});
  const std::string logs = read_text(dir_.sub("a.log")) + "--- b\n" + read_text(dir_.sub("b.log"));
  EXPECT_FALSE(has(logs, "in_progress")) << logs;
}

// Without --store the records go to a SQLite file in the state folder, one per source
// and group, so a restart remembers what ran; and the consumer keeps its name, so a
// restart after SIGTERM takes back its pending entries at once instead of waiting a
// lease for them, while two consumers running on one host get two names.
TEST_F(ExecSidecar, WithoutFlagsARestartRemembersAndTakesBackItsEntriesAtOnce) {
  std::vector<std::string> orders;
  for (int i = 0; i < 40; ++i) orders.push_back(R"({"id":"r-)" + std::to_string(i) + R"(","sleep_ms":100})");
  publish(orders);
  auto start = [&](const std::string& out) {
    return spawn_idem({"consume", "--source", stream() + "?group=g", "--handler", handler_->spec(), "--workers", "1",
                       "--lease-ms", "30000", "--idle-exit-ms", "2000"},
                      out);
  };
  const pid_t a = start(dir_.sub("a.log"));
  for (int i = 0; i < 400 && calls(handler_->log()).size() < 3; ++i) std::this_thread::sleep_for(25ms);
  kill(a, SIGTERM);
  EXPECT_EQ(wait_exit(a, 30s), 0) << read_text(dir_.sub("a.log"));
  auto pending = server_->command({"XPENDING", "orders", "g"});
  ASSERT_TRUE(pending.ok() && !pending->elements.empty());
  ASSERT_GT(pending->elements[0].integer, 0) << "the stopped consumer left no entry pending: nothing to take back";
  EXPECT_TRUE(has(read_text(dir_.sub("a.log")),
                  "no --store: the records are kept in sqlite:" + testing::idem_state_directory() + "/consume-"))
      << read_text(dir_.sub("a.log"));
  publish({orders[0], orders[1]});  // copies of messages the first run handled
  const auto restarted = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(start(dir_.sub("b.log")), 60s), 0) << read_text(dir_.sub("b.log"));
  const auto took = std::chrono::steady_clock::now() - restarted;
  EXPECT_LT(took, 20s) << "the restart waited for the lease (30 s) of its own entries";
  const auto c = calls(handler_->log());
  EXPECT_EQ(c.size(), orders.size());
  for (const auto& [id, attempts] : c) EXPECT_EQ(attempts.size(), 1u) << id << " ran more than once";
  EXPECT_TRUE(has(read_text(dir_.sub("b.log")), R"("id":"r-0","action":"ack","reason":"duplicate")"))
      << read_text(dir_.sub("b.log"));
  auto consumers = [&] {
    std::set<std::string> names;
    auto r = server_->command({"XINFO", "CONSUMERS", "orders", "g"});
    if (r.ok())
      for (const auto& consumer : r->elements) names.insert(consumer.elements.at(1).str);
    return names;
  };
  EXPECT_EQ(consumers().size(), 1u) << "both runs under one name";
  const pid_t x = start(dir_.sub("x.log")), y = start(dir_.sub("y.log"));
  for (int i = 0; i < 200 && consumers().size() < 2; ++i) std::this_thread::sleep_for(25ms);
  EXPECT_EQ(consumers().size(), 2u) << "two consumers at once, two names (one of them the runs' name)";
  EXPECT_EQ(wait_exit(x, 30s), 0);
  EXPECT_EQ(wait_exit(y, 30s), 0);
}

// A body that is not UTF-8 (so not JSON) reaches an exec: handler as body_base64,
// its id taken from the broker.
TEST_F(ExecSidecar, ABodyThatIsNotUtf8GoesAsBase64) {
  ASSERT_TRUE(server_->command({"XADD", "orders", "*", "body", std::string("\xff\xfe\x00!", 4)}).ok());
  const std::string out = consume({"--id", "broker"});
  EXPECT_TRUE(has(out, R"("action":"ack","reason":"processed","result":"{\"bytes\":4,)")) << out;
}

// On a terminal (a pseudo-terminal from script(1)) a status line comes every second;
// with --quiet, or without a terminal, none.
TEST_F(PythonSidecar, AProgressLineOnATerminalOnly) {
  publish({R"({"id":"t-1"})"});
  auto on_terminal = [&](const std::string& more) {
    const std::string command = "STATE_DIRECTORY=" + testing::idem_state_directory() + " " + IDEM_BINARY +
                                " consume --source '" + stream() + "?group=g' --store sqlite:" +
                                dir_.sub("db") + " --handler " + handler_->spec() + " --idle-exit-ms 2500 " + more;
    const std::string out = dir_.sub("terminal.log");
    std::remove(out.c_str());
    EXPECT_EQ(wait_exit(test_support::spawn({"script", "-qec", command, "/dev/null"}, out), 60s), 0) << read_text(out);
    return read_text(out);
  };
  EXPECT_TRUE(has(on_terminal(""), "msg/s  in flight")) << "a terminal shows progress";
  EXPECT_FALSE(has(on_terminal("--quiet"), "msg/s")) << "--quiet shows none";
  EXPECT_FALSE(has(consume(), "msg/s")) << "nor does a file";
}

// While it runs, /healthz answers and /metrics counts the decisions by reason.
TEST_F(PythonSidecar, ServesMetricsAndHealthWhileItRuns) {
  publish({R"({"id":"m-1"})", R"({"id":"m-1"})", R"({"id":"m-2","reject":true})"});
  const int port = test_support::free_port();
  const pid_t pid = spawn_idem({"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db"),
                                "--handler", handler_->spec(), "--workers", "1", "--metrics-listen",
                                "127.0.0.1:" + std::to_string(port)},
                               dir_.sub("consume.log"));
  httplib::Client client("127.0.0.1", port);
  std::string metrics;
  for (int i = 0; i < 200 && !has(metrics, R"(idem_decisions_total{reason="handler_rejected"} 1)"); ++i) {
    std::this_thread::sleep_for(50ms);
    if (auto r = client.Get("/metrics"); r && r->status == 200) metrics = r->body;
  }
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="processed"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="duplicate"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, R"(idem_decisions_total{reason="handler_rejected"} 1)")) << metrics;
  EXPECT_TRUE(has(metrics, "idem_runtime_")) << "the runtime's metrics too";
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 30s), 0) << read_text(dir_.sub("consume.log"));
}

// A service that is down for longer than every message's retries would take (a
// deploy) pauses the consumer instead: no message spends a retry or is dead-lettered,
// each is handled once the service is back, and the pause shows on stderr, on /readyz
// and in /metrics.
TEST_F(PythonSidecar, AServiceThatIsDownPausesTheConsumerInsteadOfSpendingRetries) {
  constexpr int kOrders = 60, kWorkers = 2;
  std::vector<std::string> orders;
  for (int i = 0; i < kOrders; ++i) orders.push_back(R"({"id":"d-)" + std::to_string(i) + R"(","sleep_ms":40})");
  publish(orders);
  const int port = test_support::free_port();
  // Two retries 100 ms apart: without the pause, the outage would dead-letter every
  // message it meets within a second.
  const pid_t pid = spawn_idem({"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db"),
                                "--handler", handler_->spec(), "--workers", std::to_string(kWorkers),
                                "--max-retries", "2", "--backoff-ms", "100", "--lease-ms", "3000",
                                "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
                               dir_.sub("consume.log"));
  auto calls_made = [&] {
    std::size_t n = 0;
    for (const auto& [id, attempts] : calls(handler_->log())) n += attempts.size();
    return n;
  };
  for (int i = 0; i < 400 && calls_made() < 10; ++i) std::this_thread::sleep_for(25ms);
  ASSERT_GE(calls_made(), 10u) << read_text(dir_.sub("consume.log"));
  handler_->stop();
  const auto down = std::chrono::steady_clock::now();
  httplib::Client client("127.0.0.1", port);
  std::string ready, metrics;
  for (int i = 0; i < 200 && !has(metrics, "idem_handler_paused 1"); ++i) {
    std::this_thread::sleep_for(50ms);
    if (auto r = client.Get("/metrics"); r) metrics = r->body;
  }
  if (auto r = client.Get("/readyz"); r) ready = std::to_string(r->status) + " " + r->body;
  EXPECT_TRUE(has(metrics, "idem_handler_paused 1")) << metrics;
  EXPECT_TRUE(has(ready, "503 paused: the handler is unavailable")) << ready;
  std::this_thread::sleep_for(6s - (std::chrono::steady_clock::now() - down));
  handler_->start_again();
  ASSERT_FALSE(handler_->spec().empty()) << "the service did not start again";
  // Decision lines reach the log when idem exits (a file is block-buffered): /metrics
  // counts them while it runs.
  const std::string all_done = R"(idem_decisions_total{reason="processed"} )" + std::to_string(kOrders) + "\n";
  for (int i = 0; i < 600 && !has(metrics, all_done); ++i) {
    std::this_thread::sleep_for(50ms);
    if (auto r = client.Get("/metrics"); r) metrics = r->body;
  }
  if (auto r = client.Get("/readyz"); r) ready = std::to_string(r->status) + " " + r->body;
  if (auto r = client.Get("/metrics"); r) metrics = r->body;
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 30s), 0);
  const std::string out = read_text(dir_.sub("consume.log"));
  EXPECT_EQ(ready, "200 ok\n");
  EXPECT_TRUE(has(metrics, "idem_handler_paused 0")) << metrics;
  EXPECT_TRUE(has(metrics, "idem_handler_pauses_total 1")) << metrics;
  EXPECT_FALSE(has(metrics, "idem_handler_unavailable_calls_total 0")) << metrics;
  EXPECT_TRUE(has(out, "the handler is unavailable (the handler could not be reached: Connection)")) << out;
  EXPECT_TRUE(has(out, "the handler answers again, after")) << out;
  EXPECT_FALSE(has(out, R"("action":"dead_letter")")) << out;
  // Only the calls that the stopping service cut short (the request sent, the
  // connection then closed: "Read") failed and were retried, none that it refused.
  std::size_t retried = 0;
  for (int i = 0; i < kOrders; ++i) {
    const std::string id = "d-" + std::to_string(i);
    EXPECT_TRUE(has(out, R"("id":")" + id + R"(","action":"ack","reason":"processed")")) << id << "\n" << out;
    retried += has(out, R"("id":")" + id + R"(","action":"retry")");
  }
  EXPECT_FALSE(has(out, "could not be reached: Connection\"}")) << out;
  EXPECT_LT(retried, static_cast<std::size_t>(kOrders / 10)) << out;
}

// A call slower than --handler-timeout-ms: the service (Python's, Node's), which
// honours Idem-Timeout-Ms, gives the work up by then, and idem calls again only after
// that (its connection closed, the lease still covering the deadline): no two calls of
// one id overlap, and each order is done once.
TEST_P(HttpSidecar, ACallPastItsDeadlineNeverOverlapsTheNextCallOfItsId) {
  constexpr int kOrders = 8;
  std::vector<std::string> orders;
  for (int i = 0; i < kOrders; ++i)
    orders.push_back(R"({"id":"t-)" + std::to_string(i) + (i % 2 == 0 ? R"(","sleep_ms":2500,"slow_once":true})" : R"("})"));
  publish(orders);
  const std::string out = consume({"--handler-timeout-ms", "1000", "--lease-ms", "3000", "--workers", "2"});
  struct Span {
    long long start, end;
    std::string outcome;
  };
  std::map<std::string, std::vector<Span>> spans;
  std::ifstream f(handler_->log() + ".spans");
  std::string id;
  Span s;
  while (f >> id >> s.start >> s.end >> s.outcome) spans[id].push_back(s);
  int abandoned = 0;
  for (int i = 0; i < kOrders; ++i) {
    const std::string order = "t-" + std::to_string(i);
    std::vector<Span>& runs = spans[order];
    std::sort(runs.begin(), runs.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    EXPECT_EQ(std::count_if(runs.begin(), runs.end(), [](const Span& c) { return c.outcome == "done"; }), 1)
        << order << " done once";
    for (std::size_t k = 1; k < runs.size(); ++k)
      EXPECT_GE(runs[k].start, runs[k - 1].end) << order << ": call " << k + 1 << " began while call " << k << " ran";
    abandoned += static_cast<int>(
        std::count_if(runs.begin(), runs.end(), [](const Span& c) { return c.outcome == "abandoned"; }));
    EXPECT_TRUE(has(out, R"("id":")" + order + R"(","action":"ack","reason":"processed")")) << order << "\n" << out;
  }
  EXPECT_EQ(abandoned, kOrders / 2) << "each slow order's first call ran past its deadline";
  EXPECT_TRUE(has(out, R"("id":"t-0","action":"retry","reason":"handler_failed")")) << out;
}

// examples/sidecar/handler.py behind TLS, with the server certificate of tls_files.
class HttpsSidecar : public SidecarBase {
 protected:
  void SetUp() override {
    auto s = RedisServer::start({});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
    std::string error;
    auto files = test_support::make_tls_files(dir_.sub("tls"), &error);
    ASSERT_TRUE(files.has_value()) << error;
    tls_ = *files;
    const std::string script = dir_.sub("https_handler.py");
    std::ofstream(script) << (
        "import importlib.util, ssl, sys\n"
        "from http.server import ThreadingHTTPServer\n"
        "spec = importlib.util.spec_from_file_location('handler', '" IDEM_SIDECAR_EXAMPLES "/handler.py')\n"
        "handler = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(handler)\n"
        "server = ThreadingHTTPServer(('127.0.0.1', 0), handler.Handler)\n"
        "server.log = sys.argv[1]\n"
        "context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
        "context.load_cert_chain(sys.argv[2], sys.argv[3])\n"
        "server.socket = context.wrap_socket(server.socket, server_side=True)\n"
        "print(f'PORT={server.server_address[1]}', flush=True)\n"
        "server.serve_forever()\n");
    const std::string out = dir_.sub("handler.out");
    pid_ = test_support::spawn({"python3", script, dir_.sub("calls.log"), tls_.server_cert, tls_.server_key}, out);
    for (int i = 0; i < 200 && port_.empty(); ++i) {
      const std::string text = read_text(out);
      if (const auto at = text.find("PORT="); at != std::string::npos && text.find('\n', at) != std::string::npos)
        port_ = text.substr(at + 5, text.find('\n', at) - at - 5);
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_FALSE(port_.empty()) << read_text(out);
  }
  void TearDown() override { test_support::reap(pid_, SIGTERM); }

  std::string url(const std::string& host = "127.0.0.1") const { return "https://" + host + ":" + port_ + "/orders"; }
  // idem consume with the handler at url and `more`; its exit status and output.
  std::pair<int, std::string> run(const std::string& handler_url, const std::vector<std::string>& more) {
    std::vector<std::string> args{"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db")};
    args.insert(args.end(), {"--handler", handler_url, "--idle-exit-ms", "1500"});
    args.insert(args.end(), more.begin(), more.end());
    const std::string out = dir_.sub("consume.log");
    std::remove(out.c_str());
    const int rc = wait_exit(spawn_idem(args, out), 60s);
    return {rc, read_text(out)};
  }

  test_support::TlsFiles tls_;
  pid_t pid_ = -1;
  std::string port_;
};

// An https:// service: verified against --handler-ca (or the system's trust store) and
// its name; one it cannot verify stops idem consume at start, in one line.
TEST_F(HttpsSidecar, AServiceOverTlsIsVerifiedAtStart) {
  publish({R"({"id":"t-1"})", R"({"id":"t-2"})"});
  for (const std::string& ca : {tls_.other_ca, std::string()}) {
    std::vector<std::string> flags;
    if (!ca.empty()) flags = {"--handler-ca", ca};
    const auto [rc, out] = run(url(), flags);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("idem consume: --handler: the TLS handshake with https://127.0.0.1:"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  EXPECT_TRUE(calls(dir_.sub("calls.log")).empty()) << "nothing reached the service";
  const auto [rc, out] = run(url(), {"--handler-ca", tls_.ca});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(has(out, R"("id":"t-1","action":"ack","reason":"processed")")) << out;
  EXPECT_TRUE(has(out, R"("id":"t-2","action":"ack","reason":"processed")")) << out;
  EXPECT_EQ(calls(dir_.sub("calls.log")).size(), 2u);
  publish({R"({"id":"t-3"})"});
  const auto [by_name, named] = run(url("localhost"), {"--handler-ca", tls_.ca});
  EXPECT_EQ(by_name, 0) << named;
  EXPECT_TRUE(has(named, R"("id":"t-3","action":"ack","reason":"processed")")) << named;
  publish({R"({"id":"t-4"})"});
  const auto [insecure, warned] = run(url(), {"--handler-tls-insecure"});
  EXPECT_EQ(insecure, 0) << warned;
  EXPECT_NE(warned.find("idem consume: warning: --handler-tls-insecure"), std::string::npos) << warned;
  EXPECT_TRUE(has(warned, R"("id":"t-4","action":"ack","reason":"processed")")) << warned;
}

// A YAML file gives the flags; the same flag on the command line wins.
TEST_F(PythonSidecar, AConfigFileGivesTheFlagsAndTheCommandLineWins) {
  publish({R"({"order":{"id":"cfg-1"}})"});
  std::ofstream(dir_.sub("consume.yaml")) << "source: " << stream() << "?group=g\n"
                                          << "store: sqlite:" << dir_.sub("db") << "\n"
                                          << "handler: " << handler_->spec() << "\n"
                                          << "idle_exit_ms: 1500\nworkers: 1\nquiet: true\n"
                                          << "id: /nowhere\n";
  const std::string out = dir_.sub("consume.log");
  ASSERT_EQ(wait_exit(spawn_idem({"consume", "--config", dir_.sub("consume.yaml"), "--id", "/order/id"}, out), 60s), 0)
      << read_text(out);
  EXPECT_TRUE(has(read_text(out), R"("id":"cfg-1","action":"ack","reason":"processed")")) << read_text(out);
}

// Debian's Prometheus, started for the test, scrapes a running idem consume; its
// HTTP API then answers the decision counters, and every query of the Grafana
// dashboard in docs/ runs and names metrics that idem serves.
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, int target_port) : port_(test_support::free_port()) {
    std::ofstream(dir + "/prometheus.yml") << "global: {scrape_interval: 1s}\n"
                                           << "scrape_configs:\n  - job_name: idem\n    static_configs:\n"
                                           << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    pid_ = test_support::spawn({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                                "--storage.tsdb.path=" + dir + "/prometheus-data",
                                "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
                               dir + "/prometheus.log");
  }
  ~PrometheusServer() { test_support::reap(pid_, SIGTERM); }

  // The API's answer to an instant query (null when it did not answer).
  nlohmann::json query(const std::string& promql) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!r || r->status != 200) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  // The value of a query's single sample, or "" while there is none.
  std::string value(const std::string& promql) {
    const nlohmann::json a = query(promql);
    if (!a.is_object() || a["data"]["result"].empty()) return "";
    return a["data"]["result"][0]["value"][1].get<std::string>();
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

TEST_F(PythonSidecar, PrometheusScrapesTheDecisionCountersAndTheDashboardQueriesRun) {
  publish({R"({"id":"m-1"})", R"({"id":"m-1"})", R"({"id":"m-2","reject":true})"});
  const int port = test_support::free_port();
  const pid_t pid = spawn_idem({"consume", "--source", stream() + "?group=g", "--store", "sqlite:" + dir_.sub("db"),
                                "--handler", handler_->spec(), "--workers", "1", "--metrics-listen",
                                "127.0.0.1:" + std::to_string(port)},
                               dir_.sub("consume.log"));
  PrometheusServer prometheus(dir_.str(), port);
  const std::string processed = R"(idem_decisions_total{job="idem",reason="processed"})";
  const std::string rejected = R"(idem_decisions_total{job="idem",reason="handler_rejected"})";
  for (int i = 0; i < 600 && (prometheus.value(processed) != "1" || prometheus.value(rejected) != "1"); ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(prometheus.value(processed), "1") << read_text(dir_.sub("prometheus.log"));
  EXPECT_EQ(prometheus.value(rejected), "1");
  EXPECT_EQ(prometheus.value(R"(idem_decisions_total{job="idem",reason="duplicate"})"), "1");

  httplib::Client idem("127.0.0.1", port);
  auto served = idem.Get("/metrics");
  ASSERT_TRUE(served);
  std::ifstream f(std::string(IDEM_SOURCE_DIR) + "/docs/grafana/idem-consume.json");
  const nlohmann::json dashboard = nlohmann::json::parse(f);
  int queries = 0;
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      for (std::size_t at; (at = expr.find("$job")) != std::string::npos;) expr.replace(at, 4, "idem");
      const nlohmann::json answer = prometheus.query(expr);
      EXPECT_TRUE(answer.is_object() && answer["status"] == "success") << panel["title"] << ": " << expr;
      ++queries;
      for (std::size_t at = expr.find("idem_"); at != std::string::npos; at = expr.find("idem_", at + 1)) {
        const std::string name = expr.substr(at, expr.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", at) - at);
        EXPECT_TRUE(has(served->body, name)) << name << " in " << panel["title"] << " is not a metric idem serves";
      }
    }
  }
  EXPECT_GE(queries, 7);
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 30s), 0) << read_text(dir_.sub("consume.log"));
}

INSTANTIATE_TEST_SUITE_P(Handlers, Sidecar,
                         ::testing::Values(Kind{"python", true}, Kind{"node", true}, Kind{"exec", false}),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(i.param.name); });
INSTANTIATE_TEST_SUITE_P(Services, HttpSidecar, ::testing::Values(Kind{"python", true}, Kind{"node", true}),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace idem::sidecar_test
