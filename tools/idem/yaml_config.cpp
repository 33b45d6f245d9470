#include "yaml_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <vector>

namespace idem::cli {
namespace {

// The file's flag names and their values.
std::vector<CLI::ConfigItem> read_items(const std::string& path) {
  std::ifstream input(path);
  if (!input) throw CLI::ConfigError("--config: cannot read " + path);
  const std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw CLI::ConfigError("--config: not YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1));
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) throw CLI::ConfigError("--config: the file is not a mapping of flag names to values");
  std::vector<CLI::ConfigItem> out;
  for (const auto& entry : root) {
    CLI::ConfigItem item;
    item.name = entry.first.Scalar();
    std::replace(item.name.begin(), item.name.end(), '_', '-');
    const YAML::Node& value = entry.second;
    if (value.IsScalar()) {
      item.inputs.push_back(value.Scalar());
    } else if (value.IsSequence() && std::all_of(value.begin(), value.end(), [](const YAML::Node& v) { return v.IsScalar(); })) {
      for (const auto& v : value) item.inputs.push_back(v.Scalar());
    } else {
      throw CLI::ConfigError("--config: \"" + item.name + "\" must be a value or a list of values");
    }
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

void apply_yaml_config(CLI::App& cmd, const std::string& path) {
  for (const CLI::ConfigItem& item : read_items(path)) {
    CLI::Option* opt = cmd.get_option_no_throw("--" + item.name);
    if (opt == nullptr || item.name == "config")
      throw CLI::ConfigError("--config: \"" + item.name + "\" is not a flag of idem " + cmd.get_name());
    if (opt->count() > 0) continue;  // given on the command line
    opt->add_result(item.inputs);
    opt->run_callback();
  }
}

}  // namespace idem::cli
