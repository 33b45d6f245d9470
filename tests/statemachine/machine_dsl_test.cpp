// The C++ declaration: the same validation as the file form, errors at C++ lines,
// compile-time checks of literal tables.
#include "idem/machine_dsl.hpp"

#include <gtest/gtest.h>

#include <string>

#include "idem/statemachine.hpp"
#include "statemachine/product_machine.hpp"

namespace idem {
namespace {

// The product machine as a compile-time-checked table of literals.
constexpr StaticRow kProductRows[] = {
    {"offline", "online", "online"},
    {"online", "offline", "offline"},
    {"online", "delete", "deleted"},
    {"offline", "delete", "deleted"},
};
constexpr std::string_view kProductFinals[] = {"deleted"};
static_assert(static_table_error(kProductRows, "offline", kProductFinals).empty());

// What static_table_error() catches (each would fail a static_assert).
constexpr StaticRow kConflict[] = {{"a", "go", "b"}, {"a", "go", "c"}};
static_assert(static_table_error(kConflict, "a") == "a (from, event) pair has two different targets");
constexpr StaticRow kOutOfFinal[] = {{"a", "go", "b"}, {"b", "back", "a"}};
constexpr std::string_view kFinalB[] = {"b"};
static_assert(static_table_error(kOutOfFinal, "a", kFinalB) == "a row leaves a final state");
constexpr StaticRow kEmpty[] = {{"a", "", "b"}};
static_assert(static_table_error(kEmpty, "a") == "a row has an empty name");
static_assert(static_table_error(kProductRows, "nowhere") == "the initial state is not named in any row");
constexpr std::string_view kUnknownFinal[] = {"gone"};
static_assert(static_table_error(kProductRows, "offline", kUnknownFinal) == "a final state is not named in any row");
constexpr StaticRow kSame[] = {{"a", "go", "b"}, {"a", "go", "b"}};
static_assert(static_table_error(kSame, "a").empty());  // a duplicate row is only a warning

const Diagnostic* find(const BuildResult& r, std::string_view text) {
  for (const auto& d : r.diagnostics)
    if (d.message.find(text) != std::string::npos) return &d;
  return nullptr;
}

TEST(MachineDsl, SameTableAsTheYamlFile) {
  const BuildResult yaml = load_machine_file(testing::product_file());
  ASSERT_TRUE(yaml.ok()) << yaml.format(Severity::kError);
  EXPECT_TRUE(yaml.diagnostics.empty());
  const TransitionTable dsl = testing::product_table();
  EXPECT_TRUE(dsl == *yaml.table);
  EXPECT_EQ(to_dot(dsl), to_dot(*yaml.table));
}

TEST(MachineDsl, StaticRowsGiveTheSameTable) {
  BuildResult r = Machine("product")
                      .initial("offline")
                      .final_states(kProductFinals)
                      .max_retries(5)
                      .backoff({Duration(1000), 2.0, Duration(60'000)})
                      .rows(kProductRows)
                      .build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  EXPECT_TRUE(*r.table == testing::product_table());
}

TEST(MachineDsl, DifferentTablesCompareUnequal) {
  BuildResult r = Machine("product").initial("offline").rows(kProductRows).build();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r.table == testing::product_table());  // no final state
}

// A row with the line it was written on (both taken on the same source line).
struct RowAt {
  TransitionRow row;
  int line;
};

TEST(MachineDsl, ConflictingTargetsPointAtTheCppLine) {
  const RowAt first{row("a", "go", "b"), __LINE__};
  const RowAt second{row("a", "go", "c"), __LINE__};
  BuildResult r = Machine("m").initial("a").add(first.row).add(second.row).build();
  EXPECT_FALSE(r.ok());
  const Diagnostic* d = find(r, "has two targets");
  ASSERT_NE(d, nullptr) << r.format(Severity::kError);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->pos.line, second.line);
  EXPECT_NE(d->pos.file.find("machine_dsl_test.cpp"), std::string::npos);
  EXPECT_EQ(d->message, "state \"a\" on \"go\" has two targets: \"b\" (first at line " + std::to_string(first.line) +
                            ", column " + std::to_string(first.row.pos.column) + ") and \"c\"");
}

TEST(MachineDsl, SmlStyleRowsRecordTheirLine) {
  using namespace idem::dsl;
  const RowAt go{state("a") + event("go") = state("b"), __LINE__};
  const RowAt back{state("b") + event("back") = state("a"), __LINE__};
  BuildResult r = Machine("m").initial("a").final_states({"b"}).add(go.row).add(back.row).build();
  EXPECT_FALSE(r.ok());
  const Diagnostic* d = find(r, "transition out of final state \"b\" on \"back\"");
  ASSERT_NE(d, nullptr) << r.format(Severity::kError);
  EXPECT_EQ(d->pos.line, back.line);
  EXPECT_EQ(go.row.to.pos.line, go.line);
}

TEST(MachineDsl, EveryValidationOfTheFileFormApplies) {
  BuildResult r = Machine("").initial("nowhere").final_states({"gone"}).rows({row("a", "", "b")}).build();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(find(r, "missing or empty machine name"), nullptr);
  EXPECT_NE(find(r, "unknown initial state \"nowhere\""), nullptr);
  EXPECT_NE(find(r, "unknown final state \"gone\""), nullptr);
  EXPECT_NE(find(r, "empty event name"), nullptr);
  EXPECT_EQ(r.error_count(), 4u) << r.format(Severity::kError);

  r = Machine("m").initial("a").build();
  EXPECT_NE(find(r, "the table has no transitions"), nullptr);
  r = Machine("m").rows({row("a", "go", "b")}).build();
  EXPECT_NE(find(r, "missing or empty initial state"), nullptr);
}

TEST(MachineDsl, BackoffAndLimitsAreChecked) {
  BuildResult r = Machine("m")
                      .initial("a")
                      .backoff({Duration(5000), 0.5, Duration(100)})
                      .max_event_name_bytes(0)
                      .rows({row("a", "go", "b")})
                      .build();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(find(r, "backoff multiplier must be at least 1"), nullptr);
  EXPECT_NE(find(r, "backoff max_ms must be at least initial_ms"), nullptr);
  EXPECT_NE(find(r, "max_event_name_bytes must be at least 1"), nullptr);

  r = Machine("m").initial("a").max_event_name_bytes(3).rows({row("a", "long", "b")}).build();
  const Diagnostic* d = find(r, "event name of 4 bytes exceeds the limit of 3 bytes");
  ASSERT_NE(d, nullptr) << r.format(Severity::kError);
}

TEST(MachineDsl, RenamedEntriesAreChecked) {
  BuildResult r = Machine("m")
                      .initial("a")
                      .renamed("b", "a")      // b is still a state
                      .renamed("old", "zzz")  // zzz is not
                      .renamed("x", "a")
                      .renamed("x", "b")  // twice
                      .rows({row("a", "go", "b")})
                      .build();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(find(r, "renamed state \"b\" is still a state of the table"), nullptr);
  EXPECT_NE(find(r, "renamed to unknown state \"zzz\""), nullptr);
  EXPECT_NE(find(r, "state \"x\" renamed twice"), nullptr);
}

TEST(MachineDsl, DuplicateRowIsAWarning) {
  BuildResult r = Machine("m").initial("a").rows({row("a", "go", "b"), row("a", "go", "b")}).build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  EXPECT_EQ(r.warning_count(), 1u);
  EXPECT_NE(find(r, "duplicate transition \"a\" on \"go\" to \"b\""), nullptr);
  EXPECT_EQ(r.table->transitions().size(), 1u);
}

TEST(MachineDsl, TooManyStatesIsAnError) {
  Machine m("big");
  m.initial("s0");
  for (std::size_t i = 0; i <= kMaxStates; ++i)
    m.add(row("s" + std::to_string(i), "next", "s" + std::to_string(i + 1)));
  BuildResult r = m.build();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(find(r, "more than 4096 states"), nullptr) << r.format(Severity::kError);
}

TEST(MachineDsl, LongChainBuildsAndAnswers) {
  // 4000 states in a line: the reachability pass walks it without trouble.
  constexpr int kStates = 4000;
  Machine m("chain");
  m.initial("s0");
  for (int i = 0; i + 1 < kStates; ++i) m.add(row("s" + std::to_string(i), "next", "s" + std::to_string(i + 1)));
  m.add(row("s" + std::to_string(kStates - 1), "stop", "end"));
  BuildResult r = m.build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  const TransitionTable& t = *r.table;
  EXPECT_EQ(t.state_count(), static_cast<std::size_t>(kStates + 1));
  EXPECT_EQ(t.check("s0", "stop").verdict, Verdict::kNotYetValid);
  EXPECT_EQ(t.check("s3999", "next").verdict, Verdict::kNeverValid);
  EXPECT_EQ(t.check("end", "stop").verdict, Verdict::kNeverValid);
  EXPECT_EQ(t.check("s3999", "stop").verdict, Verdict::kApply);
}

}  // namespace
}  // namespace idem
