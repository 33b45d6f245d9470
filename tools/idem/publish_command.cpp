// `idem publish --to URI FILE`: one message per line of FILE, its body the line, its
// "key" field (when the line is JSON with one) the message key.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/open_source.hpp"
#include "tls_warning.hpp"

namespace idem::cli {
namespace {

constexpr std::size_t kChunk = 10'000;  // lines sent per publish call

struct PublishArgs {
  std::string to;
  std::string file = "-";
  bool msg_id = false;
};

// The line's string field `name` when it is a JSON object that has one; else empty.
std::string field_of(const nlohmann::json& j, const char* name) {
  if (!j.is_object()) return {};
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int fail(int code, const std::string& message) {
  std::cerr << "idem publish: " << message << '\n';
  return code;
}

int publish_all(Publisher& p, std::istream& in, bool msg_id) {
  std::vector<OutgoingMessage> lines;
  std::string line;
  std::uint64_t sent = 0;
  auto flush = [&]() -> Status {
    Status s = p.publish(lines);
    sent += s.ok() ? lines.size() : 0;
    lines.clear();
    return s;
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    lines.push_back({.id = msg_id ? field_of(j, "id") : std::string(), .body = std::move(line), .key = field_of(j, "key")});
    if (lines.size() == kChunk) {
      if (Status s = flush(); !s.ok()) return fail(kExitFailure, s.to_string() + " after " + std::to_string(sent));
    }
  }
  if (Status s = flush(); !s.ok()) return fail(kExitFailure, s.to_string() + " after " + std::to_string(sent));
  if (in.bad()) return fail(kExitFailure, "error reading the input after " + std::to_string(sent) + " lines");
  std::cerr << "idem publish: " << sent << " messages\n";
  return kExitOk;
}

int run_publish(const PublishArgs& a) {
  std::ifstream file;
  if (a.file != "-") {
    file.open(a.file, std::ios::in | std::ios::binary);
    if (!file) return fail(kExitFailure, "cannot read \"" + a.file + "\": " + std::strerror(errno));
  }
  warn_if_tls_insecure("publish", a.to);
  auto p = open_publisher(a.to);
  if (!p.ok() && p.status().code() == StatusCode::kInvalidArgument)
    return fail(kExitUsage, scrub_secrets("--to: " + p.status().message(), a.to));
  if (!p.ok()) return fail(kExitFailure, scrub_secrets(p.status().to_string(), a.to));
  return publish_all(**p, a.file == "-" ? std::cin : file, a.msg_id);
}

}  // namespace

void add_publish_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("publish", "Publish each line of a file as one message");
  cmd->footer("URI: a source URI (its consumer parameters, such as ?group, are not needed):\n" + broker_uri_forms() +
              "A line's \"key\" field is its message key where the broker routes by key (Pulsar).\n"
              "Exit status: 0 every line was published; 1 the broker or the input failed; 2 invalid options.");
  auto a = std::make_shared<PublishArgs>();
  cmd->add_option("--to", a->to, "Destination URI")->required();
  cmd->add_flag("--msg-id", a->msg_id,
                "Send each line's \"id\" field as the message id, where the broker deduplicates by it "
                "(off: copies reach the consumer, as from a producer that retried)");
  cmd->add_option("file", a->file, "File of messages, one per line, or - for stdin")->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_publish(*a); }; });
}

}  // namespace idem::cli
