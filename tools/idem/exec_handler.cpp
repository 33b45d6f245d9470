// `--handler exec:COMMAND`: one long-lived child per worker, a JSON line in on its
// stdin per message, a JSON line out on its stdout per answer, naming the message's id.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "external_handler.hpp"

namespace idem::cli {
namespace {

// One child process and the two ends of its pipes.
class Child {
 public:
  // Starts /bin/sh -c command with its stdin and stdout on pipes; stderr is ours. The
  // child leads a process group of its own, so that killing it kills what the shell
  // started too (a killed shell whose program ran on would overlap the next call).
  static StatusOr<std::unique_ptr<Child>> start(const std::string& command) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return unavailable("pipe failed");
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]), close(in[1]);
      return unavailable("pipe failed");
    }
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      dup2(in[0], 0);
      dup2(out[1], 1);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]), close(out[1]);
    if (pid < 0) {
      close(in[1]), close(out[0]);
      return unavailable("fork failed");
    }
    setpgid(pid, pid);  // also here: whichever runs first, the group exists before a kill
    return std::unique_ptr<Child>(new Child(pid, in[1], out[0]));
  }

  ~Child() {
    close(to_);  // EOF: a well-behaved handler exits
    close(from_);
    for (int i = 0; i < 50 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) usleep(10'000);
    if (waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill_now();
      waitpid(pid_, nullptr, 0);
    }
  }

  // Ends a child that did not answer in time, with its process group (the destructor
  // then reaps it).
  void kill_now() { kill(-pid_, SIGKILL); }

  // Writes one line; false if the child is gone.
  bool send(const std::string& line) {
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = write(to_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads one line by `deadline`: the line, or an error saying why not.
  StatusOr<std::string> receive(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (const std::size_t nl = buffered_.find('\n'); nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return unavailable("no answer by the deadline");
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return unavailable("poll failed");
      if (p.revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(from_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return unavailable("the handler process exited");
      buffered_.append(buf, static_cast<std::size_t>(n));
    }
  }

 private:
  Child(pid_t pid, int to, int from) : pid_(pid), to_(to), from_(from) {}
  const pid_t pid_;
  const int to_, from_;
  std::string buffered_;
};

// Sets r[name] to bytes, or r[name + "_base64"] to their base64 when they are not UTF-8.
void put_text(nlohmann::ordered_json& r, const std::string& name, const std::string& bytes) {
  if (external::valid_utf8(bytes)) {
    r[name] = bytes;
  } else {
    r[name + "_base64"] = external::base64(bytes);
  }
}

// The request line for m; `timeout_ms`: how long idem waits for the answer before it
// kills the child.
std::string request_line(const json::Message& m, const HandlerContext& ctx, std::int64_t timeout_ms) {
  nlohmann::ordered_json r;
  put_text(r, "id", m.id);
  if (!m.key.empty()) put_text(r, "key", m.key);
  if (m.version > 0) r["version"] = m.version;
  if (!m.event.empty()) put_text(r, "event", m.event);
  r["attempt"] = ctx.attempt();
  r["timeout_ms"] = timeout_ms;
  put_text(r, "body", m.body);
  return r.dump() + "\n";
}

// The id an answer names ("id", or "id_base64" decoded back to the base64 request
// form); nullopt when it names none.
std::optional<std::string> answered_id(const nlohmann::json& a) {
  if (a.contains("id") && a["id"].is_string()) return a["id"].get<std::string>();
  if (a.contains("id_base64") && a["id_base64"].is_string()) return "base64:" + a["id_base64"].get<std::string>();
  return std::nullopt;
}

// m's id as answered_id() gives it.
std::string request_id(const json::Message& m) {
  return external::valid_utf8(m.id) ? m.id : "base64:" + external::base64(m.id);
}

// The result of one answer `a` (a JSON object).
HandlerResult answer(const nlohmann::json& a, const std::string& line, std::size_t max_result_bytes) {
  const std::string status = a.contains("status") && a["status"].is_string() ? a["status"] : "";
  const std::string error = a.contains("error") && a["error"].is_string() ? a["error"] : "";
  if (status == "ok") {
    if (!a.contains("result") || a["result"].is_null()) return HandlerResult::ok();
    const std::string result = a["result"].is_string() ? a["result"].get<std::string>() : a["result"].dump();
    return HandlerResult::ok(result.substr(0, max_result_bytes));
  }
  if (status == "fail") return HandlerResult::fail(error.empty() ? "the handler answered fail" : error);
  if (status == "reject") return HandlerResult::reject(error.empty() ? "the handler answered reject" : error);
  if (status == "retry") {
    const bool has_delay = a.contains("delay_ms") && a["delay_ms"].is_number_unsigned();
    const Duration delay(has_delay ? a["delay_ms"].get<std::int64_t>() : 0);
    return HandlerResult::retry_after(delay, error.empty() ? "the handler answered retry" : error);
  }
  return HandlerResult::fail("the handler's answer is not {\"status\": ok|fail|retry|reject}: " + external::head(line));
}

class ExecHandler final : public ExternalHandler {
  static constexpr Outcome::Service kSilent = Outcome::Service::kSilent;

 public:
  ExecHandler(std::string command, ExternalHandlerOptions o) : command_(std::move(command)), o_(o) {}

  // An answer that names another id (or none) means the child is out of step: it is
  // replaced and the message sent once more, to the new child.
  Outcome call(const json::Message& m, HandlerContext& ctx, std::chrono::steady_clock::time_point deadline) override {
    std::string out_of_step;
    for (int round = 0; round < 2; ++round) {
      auto child = take();
      if (!child.ok()) return {HandlerResult::fail("cannot start the handler: " + child.status().message()), kSilent};
      if (!(*child)->send(request_line(m, ctx, external::ms_left(deadline))))
        return {HandlerResult::fail("the handler process exited"), kSilent};
      Reply reply = read_answer(**child, m, deadline);
      if (reply.in_step) {
        give_back(std::move(*child));
        return {answer(reply.json, reply.line, o_.max_result_bytes)};
      }
      (*child)->kill_now();
      if (!reply.failure.empty())
        return {HandlerResult::fail(reply.failure + "; the handler process is restarted"), kSilent};
      out_of_step = reply.line;
    }
    return {HandlerResult::fail("the handler answered for another id (" + external::head(out_of_step) +
                                ") twice; its process is restarted")};
  }

 private:
  struct Reply {
    bool in_step = false;   // json is this message's answer
    nlohmann::json json;
    std::string line;       // the answer, or the line that named another id
    std::string failure;    // no answer in time, or the child exited
  };

  // Reads lines until this message's answer. A line that is not a JSON object is not
  // an answer (a stray print): it is copied to stderr and skipped.
  Reply read_answer(Child& child, const json::Message& m, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      StatusOr<std::string> line = child.receive(deadline);
      if (!line.ok()) {
        const bool late = std::chrono::steady_clock::now() >= deadline;
        return {.failure = late ? external::timed_out(o_.timeout) : line.status().message()};
      }
      auto a = nlohmann::json::parse(*line, nullptr, false);
      if (!a.is_object()) {
        std::fprintf(stderr, "idem consume: the exec handler wrote a line that is not an answer: %s\n",
                     external::head(*line).c_str());
        continue;
      }
      if (answered_id(a) != request_id(m)) return {.line = std::move(*line)};
      return {.in_step = true, .json = std::move(a), .line = std::move(*line)};
    }
  }

  StatusOr<std::unique_ptr<Child>> take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return Child::start(command_);
  }
  void give_back(std::unique_ptr<Child> c) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(c));
  }

  const std::string command_;
  const ExternalHandlerOptions o_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Child>> idle_;
};

}  // namespace

StatusOr<std::unique_ptr<ExternalHandler>> open_exec_handler(std::string_view command,
                                                             const ExternalHandlerOptions& options) {
  signal(SIGPIPE, SIG_IGN);  // a child that died makes write() fail, not kill us
  return std::unique_ptr<ExternalHandler>(std::make_unique<ExecHandler>(std::string(command), options));
}

}  // namespace idem::cli
