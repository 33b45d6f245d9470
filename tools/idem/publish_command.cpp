// `idem publish --to URI FILE`: one message per line of FILE, its body the line.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/redis_stream_source.hpp"

namespace idem::cli {
namespace {

constexpr std::size_t kChunk = 10'000;  // lines sent per publish call

struct PublishArgs {
  std::string to;
  std::string file = "-";
};

int fail(int code, const std::string& message) {
  std::cerr << "idem publish: " << message << '\n';
  return code;
}

int publish_all(redis_streams::Publisher& p, std::istream& in) {
  std::vector<std::string> lines;
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
    lines.push_back(std::move(line));
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
  auto o = redis_streams::parse_uri(a.to);
  if (!o.ok()) return fail(kExitUsage, "--to: " + o.status().message());
  std::ifstream file;
  if (a.file != "-") {
    file.open(a.file, std::ios::in | std::ios::binary);
    if (!file) return fail(kExitFailure, "cannot read \"" + a.file + "\": " + std::strerror(errno));
  }
  auto p = redis_streams::Publisher::open(*o);
  if (!p.ok()) return fail(kExitFailure, p.status().to_string());
  return publish_all(**p, a.file == "-" ? std::cin : file);
}

}  // namespace

void add_publish_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("publish", "Publish each line of a file as one message");
  cmd->footer(
      "URI: redis-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM (?group is not needed)\n"
      "Exit status: 0 every line was published; 1 the broker or the input failed; 2 invalid options.");
  auto a = std::make_shared<PublishArgs>();
  cmd->add_option("--to", a->to, "Destination URI")->required();
  cmd->add_option("file", a->file, "File of messages, one per line, or - for stdin")->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_publish(*a); }; });
}

}  // namespace idem::cli
