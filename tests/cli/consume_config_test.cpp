// `idem consume --config FILE` refused clearly, without a broker: an unknown key, a
// file that is not YAML, a value of the wrong shape, a missing file, a missing
// --source; none of the messages quotes the file's URIs.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_store.hpp"

namespace idem::testing {
namespace {

RunResult with_config(const std::string& yaml, const TempDir& dir) {
  return run_idem({"consume", "--config", dir.write("consume.yaml", yaml)});
}

TEST(ConsumeConfig, BadFilesExitTwoNamingTheKeyOrLineAndNeverTheURI) {
  TempDir dir;
  const std::string source = "source: redis-stream://:s3cret@127.0.0.1:1/s?group=g\n";
  struct Case {
    std::string yaml, says;
  };
  for (const Case& c : {Case{source + "nope: 1\n", "\"nope\" is not a flag of idem consume"},
                        Case{source + "store: [a\n", "not YAML at line"},
                        Case{source + "store: {a: b}\n", "\"store\" must be a value or a list of values"},
                        Case{"- a\n- b\n", "not a mapping"},
                        Case{source + "config: other.yaml\n", "\"config\" is not a flag"},
                        Case{"workers: 2\n", "--source is required"},
                        Case{source + "workers: 0\n", "--workers"}}) {
    const RunResult r = with_config(c.yaml, dir);
    EXPECT_EQ(r.exit_code, 2) << c.yaml;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.yaml << " → " << r.err;
    EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
  }
  const RunResult missing = run_idem({"consume", "--config", dir.path() + "/absent.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace idem::testing
