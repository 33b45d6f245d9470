// `--handler exec:COMMAND`: one long-lived child per worker, a JSON line in on its
// stdin per message, a JSON line out on its stdout per answer.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "external_handler.hpp"

namespace idem::cli {
namespace {

// One child process and the two ends of its pipes.
class Child {
 public:
  // Starts /bin/sh -c command with its stdin and stdout on pipes; stderr is ours.
  static StatusOr<std::unique_ptr<Child>> start(const std::string& command) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return unavailable("pipe failed");
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]), close(in[1]);
      return unavailable("pipe failed");
    }
    const pid_t pid = fork();
    if (pid == 0) {
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
    return std::unique_ptr<Child>(new Child(pid, in[1], out[0]));
  }

  ~Child() {
    close(to_);  // EOF: a well-behaved handler exits
    close(from_);
    for (int i = 0; i < 50 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) usleep(10'000);
    if (waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Ends a child that did not answer in time (the destructor then reaps it).
  void kill_now() { kill(pid_, SIGKILL); }

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

  // Reads one line within `timeout`: the line, or an error saying why not.
  StatusOr<std::string> receive(Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const std::size_t nl = buffered_.find('\n'); nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return unavailable("no answer within " + std::to_string(timeout.count()) + " ms");
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

// The request line for m.
std::string request_line(const json::Message& m, const HandlerContext& ctx) {
  nlohmann::ordered_json r;
  put_text(r, "id", m.id);
  if (!m.key.empty()) put_text(r, "key", m.key);
  if (m.version > 0) r["version"] = m.version;
  if (!m.event.empty()) put_text(r, "event", m.event);
  r["attempt"] = ctx.attempt();
  put_text(r, "body", m.body);
  return r.dump() + "\n";
}

// The result of one answer line.
HandlerResult answer(const std::string& line, std::size_t max_result_bytes) {
  const auto a = nlohmann::json::parse(line, nullptr, false);
  const std::string status = a.is_object() && a.contains("status") && a["status"].is_string() ? a["status"] : "";
  const std::string error = a.is_object() && a.contains("error") && a["error"].is_string() ? a["error"] : "";
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
 public:
  ExecHandler(std::string command, ExternalHandlerOptions o) : command_(std::move(command)), o_(o) {}

  HandlerResult call(const json::Message& m, HandlerContext& ctx) override {
    auto child = take();
    if (!child.ok()) return HandlerResult::fail("cannot start the handler: " + child.status().message());
    if (!(*child)->send(request_line(m, ctx))) return HandlerResult::fail("the handler process exited");
    StatusOr<std::string> line = (*child)->receive(o_.timeout);
    if (!line.ok()) {
      (*child)->kill_now();
      return HandlerResult::fail(line.status().message() + "; the handler process is restarted");
    }
    HandlerResult r = answer(*line, o_.max_result_bytes);
    give_back(std::move(*child));  // a child whose answer failed to parse is still in step: one line each way
    return r;
  }

 private:
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
