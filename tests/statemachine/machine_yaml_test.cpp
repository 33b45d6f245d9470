// The YAML form: every error with its line and column, warnings, malformed YAML, and
// hostile files refused by a limit.
#include "idem/machine_yaml.hpp"

#include <gtest/gtest.h>

#include <string>

#include "idem/statemachine.hpp"
#include "statemachine/product_machine.hpp"

namespace idem {
namespace {

// The diagnostics, one to_string() per line: what `idem machine check` prints.
std::string all(const BuildResult& r) {
  std::string out;
  for (const auto& d : r.diagnostics) out += d.to_string() + "\n";
  return out;
}

BuildResult load(const std::string& text, const YamlLimits& limits = {}) {
  return load_machine_yaml(text, "m.yaml", limits);
}

TEST(MachineYaml, LoadsTheIssueExample) {
  const BuildResult r = load(testing::kProductYaml);
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_TRUE(r.diagnostics.empty());
  EXPECT_EQ(r.table->name(), "product");
  EXPECT_EQ(r.table->state_name(r.table->initial()), "offline");
  EXPECT_EQ(r.table->max_retries(), 5u);
  EXPECT_EQ(r.table->backoff().initial, Duration(1000));
  EXPECT_DOUBLE_EQ(r.table->backoff().multiplier, 2.0);
  EXPECT_EQ(r.table->backoff().max, Duration(60'000));
  EXPECT_TRUE(*r.table == testing::product_table());
}

TEST(MachineYaml, DefaultsWhenOptionalKeysAreAbsent) {
  const BuildResult r = load("name: m\ninitial: a\ntransitions:\n  - {from: a, on: go, to: b}\n");
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_EQ(r.table->max_retries(), 5u);
  EXPECT_EQ(r.table->backoff().initial, Backoff{}.initial);
  EXPECT_TRUE(r.table->finals().empty());
  EXPECT_EQ(r.table->max_event_name_bytes(), kDefaultMaxEventNameBytes);
}

TEST(MachineYaml, BlockStyleRowsAndScalarFrom) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "final: c\n"
      "max_event_name_bytes: 32\n"
      "transitions:\n"
      "  - from: a\n"
      "    on: go\n"
      "    to: b\n"
      "  - from:\n"
      "      - a\n"
      "      - b\n"
      "    on: stop\n"
      "    to: c\n");
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_EQ(r.table->transitions().size(), 3u);
  EXPECT_TRUE(r.table->is_final(*r.table->state_id("c")));
  EXPECT_EQ(r.table->max_event_name_bytes(), 32u);
}

TEST(MachineYaml, UnknownKeys) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "colour: blue\n"
      "backoff: {initial_ms: 1, jitter: 2}\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b, when: now}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r),
            "m.yaml:3:1: error: unknown key \"colour\" (expected name, initial, final, max_retries, backoff, "
            "transitions, renamed, max_event_name_bytes)\n"
            "m.yaml:4:26: error: unknown key \"jitter\" in backoff (expected initial_ms, multiplier, max_ms)\n"
            "m.yaml:6:30: error: unknown key \"when\" in a transition (expected from, on, to)\n");
}

TEST(MachineYaml, UnknownInitialState) {
  const BuildResult r = load("name: m\ninitial: nowhere\ntransitions:\n  - {from: a, on: go, to: b}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "m.yaml:2:10: error: unknown initial state \"nowhere\": no transition names it\n");
}

TEST(MachineYaml, MissingInitialNameAndTransitions) {
  BuildResult r = load("name: m\ntransitions:\n  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r), "m.yaml:1:1: error: missing or empty initial state (initial)\n");
  r = load("initial: a\ntransitions:\n  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r), "m.yaml:1:1: error: missing or empty machine name (name)\n");
  r = load("name: m\ninitial: a\n");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(all(r).find("m.yaml:1:1: error: the table has no transitions (transitions)\n"), std::string::npos)
      << all(r);
}

TEST(MachineYaml, TwoTargetsForOneFromEventPair) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: [b, a], on: go, to: c}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r),
            "m.yaml:5:16: error: state \"a\" on \"go\" has two targets: \"b\" (first at line 4, column 12) "
            "and \"c\"\n");
}

TEST(MachineYaml, SameRowTwiceIsAWarning) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: a, on: go, to: b}\n");
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_EQ(all(r),
            "m.yaml:5:12: warning: duplicate transition \"a\" on \"go\" to \"b\" (first at line 4, column 12)\n");
}

TEST(MachineYaml, TransitionOutOfAFinalState) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "final: [b]\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: b, on: back, to: a}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "m.yaml:6:12: error: transition out of final state \"b\" on \"back\"\n");
}

TEST(MachineYaml, UnknownFinalState) {
  const BuildResult r = load("name: m\ninitial: a\nfinal: [b, gone]\ntransitions:\n  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r), "m.yaml:3:12: error: unknown final state \"gone\": no transition names it\n");
}

TEST(MachineYaml, EmptyNames) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "transitions:\n"
      "  - {from: a, on: \"\", to: b}\n"
      "  - {from: '', on: go, to: b}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r),
            "m.yaml:4:19: error: empty event name\n"
            "m.yaml:5:12: error: empty state name\n");
}

TEST(MachineYaml, NullNamesAndMissingRowKeys) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "transitions:\n"
      "  - {from: a, on: go, to: }\n"
      "  - {from: a, on: go}\n");
  EXPECT_FALSE(r.ok());
  const std::string text = all(r);
  EXPECT_NE(text.find("m.yaml:4:"), std::string::npos) << text;
  EXPECT_NE(text.find("error: empty state name"), std::string::npos) << text;
  EXPECT_NE(text.find("m.yaml:5:5: error: a transition without \"to\""), std::string::npos) << text;
}

TEST(MachineYaml, WrongTypes) {
  const BuildResult r = load(
      "name: [m]\n"
      "initial: a\n"
      "max_retries: many\n"
      "backoff: {initial_ms: -5, multiplier: fast, max_ms: 1.5}\n"
      "transitions:\n"
      "  - {from: {x: 1}, on: [go], to: b}\n"
      "  - just a string\n"
      "  - {from: [], on: go, to: b}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r),
            "m.yaml:1:7: error: expected a machine name, got a sequence\n"
            "m.yaml:3:14: error: max_retries: expected an integer from 0 to 4294967295, got \"many\"\n"
            "m.yaml:4:23: error: backoff initial_ms: expected an integer from 0 to 9223372036854775, got \"-5\"\n"
            "m.yaml:4:39: error: backoff multiplier: expected a number, got \"fast\"\n"
            "m.yaml:4:53: error: backoff max_ms: expected an integer from 0 to 9223372036854775, got \"1.5\"\n"
            "m.yaml:6:12: error: expected a state name, got a mapping\n"
            "m.yaml:6:24: error: expected an event name, got a sequence\n"
            "m.yaml:7:5: error: a transition: expected a mapping {from, on, to}, got a scalar\n"
            "m.yaml:8:12: error: expected at least one state name\n");
  EXPECT_FALSE(load("[1, 2]\n").ok());
  EXPECT_EQ(all(load("transitions: 3\nname: m\ninitial: a\n")),
            "m.yaml:1:14: error: transitions: expected a sequence of {from, on, to}, got a scalar\n");
}

TEST(MachineYaml, DuplicateKeys) {
  const BuildResult r = load("name: m\ninitial: a\nname: n\ntransitions:\n  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r), "m.yaml:3:1: error: duplicate key \"name\" (first at m.yaml:1:1)\n");
}

TEST(MachineYaml, BackoffValuesAreValidatedAtTheirPosition) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "backoff: {initial_ms: 5000, multiplier: 0.5, max_ms: 100}\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r),
            "m.yaml:3:10: error: backoff multiplier must be at least 1\n"
            "m.yaml:3:10: error: backoff max_ms must be at least initial_ms\n");
}

TEST(MachineYaml, UnreachableStateIsAWarningNotAnError) {
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: c, on: go, to: a}\n");
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_EQ(all(r), "m.yaml:5:12: warning: state \"c\" is unreachable from initial state \"a\"\n");
  EXPECT_EQ(r.error_count(), 0u);
  EXPECT_EQ(r.warning_count(), 1u);
}

TEST(MachineYaml, NonGraphErrorsAreReportedWithTheGraphErrors) {
  // An unknown key does not hide a conflict further down.
  const BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "colour: red\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: a, on: go, to: c}\n");
  EXPECT_EQ(r.error_count(), 2u) << all(r);
  EXPECT_NE(all(r).find("m.yaml:6:12: error: state \"a\" on \"go\" has two targets"), std::string::npos) << all(r);
}

TEST(MachineYaml, RenamedSection) {
  BuildResult r = load(
      "name: m\n"
      "initial: a\n"
      "renamed: {old_a: a}\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n");
  ASSERT_TRUE(r.ok()) << all(r);
  EXPECT_EQ(r.table->state_id("old_a"), r.table->state_id("a"));
  r = load(
      "name: m\n"
      "initial: a\n"
      "renamed: {b: a, x: nowhere}\n"
      "transitions:\n"
      "  - {from: a, on: go, to: b}\n");
  EXPECT_EQ(all(r),
            "m.yaml:3:11: error: renamed state \"b\" is still a state of the table\n"
            "m.yaml:3:20: error: renamed to unknown state \"nowhere\"\n");
}

TEST(MachineYaml, EventNameOverTheLimit) {
  const std::string long_name(300, 'e');
  const BuildResult r = load("name: m\ninitial: a\ntransitions:\n  - {from: a, on: " + long_name + ", to: b}\n");
  EXPECT_EQ(all(r),
            "m.yaml:4:19: error: event name of 300 bytes exceeds the limit of 256 bytes (max_event_name_bytes)\n");
}

TEST(MachineYaml, MalformedYamlHasAPosition) {
  BuildResult r = load("name: m\ninitial: a\ntransitions: [ {from: a, on: x, to: b}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "m.yaml:4:1: error: invalid YAML: end of sequence flow not found\n");
  r = load("name: m\n  initial: a\n");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].pos.line, 2);
  EXPECT_NE(r.diagnostics[0].message.find("invalid YAML"), std::string::npos);
  r = load("name: m: x\n");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(all(r).find("m.yaml:1:8: error: invalid YAML"), std::string::npos) << all(r);
}

TEST(MachineYaml, EmptyAndMultiDocumentFilesAreRefused) {
  EXPECT_EQ(all(load("")), "m.yaml:1:1: error: empty file: expected a mapping with the machine\n");
  EXPECT_EQ(all(load("# only a comment\n")), "m.yaml:1:1: error: empty file: expected a mapping with the machine\n");
  const BuildResult r = load(testing::kProductYaml + "---\n" + testing::kProductYaml);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u) << all(r);
  EXPECT_EQ(r.diagnostics[0].pos.line, 10);
  EXPECT_NE(r.diagnostics[0].message.find("more than one YAML document"), std::string::npos);
}

TEST(MachineYaml, DeepNestingIsRefusedBeforeTheParserRecursesFar) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const BuildResult r = load(deep);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "m.yaml:1:17: error: YAML nesting deeper than 16 (limit max_depth)\n");
  // Within the limit: a nesting of 4 (the format's own) passes the limit check.
  YamlLimits tight;
  tight.max_depth = 3;
  EXPECT_NE(all(load(testing::kProductYaml, tight)).find("limit max_depth"), std::string::npos);
}

TEST(MachineYaml, AliasBombIsRefusedByTheExpandedNodeCount) {
  // "Billion laughs": 9 levels of 10 aliases each would expand to 10^9 nodes.
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    text += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", *" : "*") + prev;
    text += "]\n";
    prev = std::string(1, c);
  }
  const BuildResult r = load(text);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u) << all(r);
  EXPECT_NE(r.diagnostics[0].message.find("more than 100000 YAML nodes after alias expansion"), std::string::npos);
  EXPECT_EQ(r.diagnostics[0].pos.line, 5);  // e: 10^5 nodes passes the limit

  // Aliases within the limit are fine (and expand as expected).
  const BuildResult ok = load(
      "name: m\n"
      "initial: a\n"
      "final: &f [c]\n"
      "transitions:\n"
      "  - {from: &both [a, b], on: stop, to: c}\n"
      "  - {from: a, on: go, to: b}\n"
      "  - {from: *both, on: reset, to: a}\n");
  ASSERT_TRUE(ok.ok()) << all(ok);
  EXPECT_EQ(ok.table->transitions().size(), 5u);
}

TEST(MachineYaml, HugeFileIsRefusedUnparsed) {
  YamlLimits small;
  small.max_file_bytes = 64;
  const BuildResult r = load(testing::kProductYaml, small);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "m.yaml: error: file of " + std::to_string(testing::kProductYaml.size()) +
                        " bytes exceeds the limit of 64 bytes (max_file_bytes)\n");
}

TEST(MachineYaml, FileErrors) {
  BuildResult r = load_machine_file("/nonexistent/machine.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(all(r), "/nonexistent/machine.yaml: error: cannot read the machine file: No such file or directory\n");
  r = load_machine_file(IDEM_SOURCE_DIR);
  EXPECT_EQ(all(r), std::string(IDEM_SOURCE_DIR) + ": error: cannot read the machine file: it is a directory\n");
  YamlLimits small;
  small.max_file_bytes = 10;
  r = load_machine_file(testing::product_file(), small);
  EXPECT_EQ(all(r), testing::product_file() + ": error: file exceeds the limit of 10 bytes (max_file_bytes)\n");
}

TEST(MachineYaml, ParseAloneGivesTheSpecWithPositions) {
  std::vector<Diagnostic> diags;
  auto spec = parse_machine_yaml(testing::kProductYaml, "p.yaml", {}, diags);
  ASSERT_TRUE(spec.has_value());
  EXPECT_TRUE(diags.empty());
  ASSERT_EQ(spec->rows.size(), 3u);
  EXPECT_EQ(spec->rows[2].from.size(), 2u);
  EXPECT_EQ(spec->rows[2].from[1].name, "offline");
  EXPECT_EQ(spec->rows[2].from[1].pos.to_string(), "p.yaml:9:21");
  EXPECT_EQ(spec->initial.pos.to_string(), "p.yaml:2:10");
  EXPECT_FALSE(parse_machine_yaml("name: [", "p.yaml", {}, diags).has_value());
  EXPECT_EQ(diags.size(), 1u);
}

}  // namespace
}  // namespace idem
