#include "yaml_limits.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <unordered_map>
#include <vector>

namespace idem::detail {
namespace {

// Thrown by the counter to stop the parser at the first limit passed.
struct LimitPassed {
  YAML::Mark mark;
  std::string message;
};

// Counts nodes as the parser emits them. An alias counts as the size of what it
// refers to, so that a "billion laughs" document is refused at its first big alias.
class Counter : public YAML::EventHandler {
 public:
  explicit Counter(const YamlLimits& limits) : limits_(limits) {}

  std::size_t documents() const { return documents_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) throw LimitPassed{mark, "more than one YAML document (a machine file holds one)"};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchor_size_.find(anchor);
    add(mark, it == anchor_size_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    std::size_t size;  // expanded nodes in this collection so far, itself included
    YAML::anchor_t anchor;
  };

  void add(const YAML::Mark& mark, std::size_t n) {
    total_ += n;
    if (total_ > limits_.max_nodes)
      throw LimitPassed{mark, "more than " + std::to_string(limits_.max_nodes) +
                                  " YAML nodes after alias expansion (limit max_nodes)"};
    if (!stack_.empty()) stack_.back().size += n;
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != 0) anchor_size_[anchor] = 1;
    add(mark, 1);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (stack_.size() + 1 > limits_.max_depth)
      throw LimitPassed{mark, "YAML nesting deeper than " + std::to_string(limits_.max_depth) + " (limit max_depth)"};
    add(mark, 1);
    stack_.push_back({1, anchor});
  }
  void close() {
    const Frame f = stack_.back();
    stack_.pop_back();
    if (f.anchor != 0) anchor_size_[f.anchor] = f.size;
    if (!stack_.empty()) stack_.back().size += f.size - 1;  // the 1 was added at open()
  }

  const YamlLimits& limits_;
  std::vector<Frame> stack_;
  std::unordered_map<YAML::anchor_t, std::size_t> anchor_size_;
  std::size_t total_ = 0;
  std::size_t documents_ = 0;
};

YamlProblem problem(const YAML::Mark& m, std::string message) {
  if (m.is_null()) return {0, 0, std::move(message)};
  return {m.line + 1, m.column + 1, std::move(message)};
}

}  // namespace

std::optional<YamlProblem> check_yaml_limits(std::string_view text, const YamlLimits& limits) {
  if (text.size() > limits.max_file_bytes)
    return YamlProblem{0, 0,
                       "file of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                           std::to_string(limits.max_file_bytes) + " bytes (max_file_bytes)"};
  std::istringstream in{std::string(text)};
  Counter counter(limits);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const LimitPassed& e) {
    return problem(e.mark, e.message);
  } catch (const YAML::Exception& e) {
    return problem(e.mark, "invalid YAML: " + e.msg);
  }
  if (counter.documents() == 0) return YamlProblem{1, 1, "empty file: expected a mapping with the machine"};
  return std::nullopt;
}

}  // namespace idem::detail
