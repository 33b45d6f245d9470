// `idem machine check|dot FILE`: runs the built idem binary.
#include <gtest/gtest.h>

#include <string>

#include "replay/run_idem.hpp"

namespace idem::testing {
namespace {

const std::string kProduct = std::string(IDEM_SOURCE_DIR) + "/examples/machines/product.yaml";

TEST(IdemMachine, CheckPrintsASummary) {
  const RunResult r = run_idem({"machine", "check", kProduct});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "machine: product (valid)\n"
            "states: 3 (offline, online, deleted)\n"
            "events: 3 (online, offline, delete)\n"
            "transitions: 4\n"
            "initial: offline\n"
            "final: deleted\n"
            "max_retries: 5\n"
            "backoff: initial_ms=1000 multiplier=2 max_ms=60000\n"
            "warnings: 0\n");
  EXPECT_EQ(r.err, "");
}

TEST(IdemMachine, CheckReportsErrorsWithFileLineColumnAndExits1) {
  TempDir dir;
  const std::string file = dir.write("bad.yaml",
                                     "name: product\n"
                                     "initial: nowhere\n"
                                     "final: [deleted]\n"
                                     "transitions:\n"
                                     "  - {from: offline, on: online, to: online}\n"
                                     "  - {from: offline, on: online, to: deleted}\n"
                                     "  - {from: deleted, on: revive, to: offline}\n");
  const RunResult r = run_idem({"machine", "check", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, file + ":2:10: error: unknown initial state \"nowhere\": no transition names it\n" + file +
                       ":6:12: error: state \"offline\" on \"online\" has two targets: \"online\" (first at line 5, "
                       "column 12) and \"deleted\"\n" +
                       file + ":7:12: error: transition out of final state \"deleted\" on \"revive\"\n" + file +
                       ": invalid: 3 error(s), 0 warning(s)\n");
}

TEST(IdemMachine, CheckWithWarningsIsValid) {
  TempDir dir;
  const std::string file = dir.write("warn.yaml",
                                     "name: m\ninitial: a\ntransitions:\n"
                                     "  - {from: a, on: go, to: b}\n"
                                     "  - {from: c, on: go, to: a}\n");
  const RunResult r = run_idem({"machine", "check", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, file + ":5:12: warning: state \"c\" is unreachable from initial state \"a\"\n");
  EXPECT_NE(r.out.find("warnings: 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final: \n"), std::string::npos) << r.out;
}

TEST(IdemMachine, MalformedAndMissingFiles) {
  TempDir dir;
  const std::string file = dir.write("broken.yaml", "name: m\ninitial: a\ntransitions: [ {from: a\n");
  RunResult r = run_idem({"machine", "check", file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind(file + ":", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("error: invalid YAML"), std::string::npos) << r.err;
  r = run_idem({"machine", "dot", dir.path() + "/absent.yaml"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cannot read the machine file"), std::string::npos) << r.err;
}

TEST(IdemMachine, BombIsRefused) {
  TempDir dir;
  const RunResult r =
      run_idem({"machine", "check", dir.write("deep.yaml", std::string(5000, '[') + std::string(5000, ']'))});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("limit max_depth"), std::string::npos) << r.err;
}

TEST(IdemMachine, DotPrintsTheGraph) {
  const RunResult r = run_idem({"machine", "dot", kProduct});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("digraph \"product\" {\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  \"deleted\" [shape=doublecircle];\n"), std::string::npos);
  EXPECT_NE(r.out.find("  \"online\" -> \"offline\" [label=\"offline\"];\n"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

TEST(IdemMachine, UsageErrors) {
  EXPECT_EQ(run_idem({"machine"}).exit_code, 2);
  EXPECT_EQ(run_idem({"machine", "check"}).exit_code, 2);
  EXPECT_EQ(run_idem({"machine", "frobnicate", kProduct}).exit_code, 2);
}

}  // namespace
}  // namespace idem::testing
