// DOT export: a golden test on the product machine, and escaping.
#include "idem/machine_dot.hpp"

#include <gtest/gtest.h>

#include "idem/statemachine.hpp"
#include "statemachine/product_machine.hpp"

namespace idem {
namespace {

constexpr const char* kProductDot =
    "digraph \"product\" {\n"
    "  rankdir=LR;\n"
    "  node [shape=circle];\n"
    "  \"__initial\" [shape=point, label=\"\"];\n"
    "  \"offline\";\n"
    "  \"online\";\n"
    "  \"deleted\" [shape=doublecircle];\n"
    "  \"__initial\" -> \"offline\";\n"
    "  \"offline\" -> \"online\" [label=\"online\"];\n"
    "  \"offline\" -> \"deleted\" [label=\"delete\"];\n"
    "  \"online\" -> \"offline\" [label=\"offline\"];\n"
    "  \"online\" -> \"deleted\" [label=\"delete\"];\n"
    "}\n";

TEST(MachineDot, ProductGolden) {
  EXPECT_EQ(to_dot(testing::product_table()), kProductDot);
  const BuildResult r = load_machine_file(testing::product_file());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(to_dot(*r.table), kProductDot);
}

TEST(MachineDot, RowOrderDoesNotChangeTheEdgeOrderWithinAState) {
  // Edges come out by (from id, event id), not by row order.
  BuildResult a = Machine("m").initial("s").rows({row("s", "x", "t"), row("s", "y", "u"), row("t", "x", "s")}).build();
  ASSERT_TRUE(a.ok());
  const std::string dot = to_dot(*a.table);
  EXPECT_LT(dot.find("\"s\" -> \"t\""), dot.find("\"s\" -> \"u\""));
  EXPECT_LT(dot.find("\"s\" -> \"u\""), dot.find("\"t\" -> \"s\""));
  EXPECT_EQ(to_dot(*a.table), dot);  // deterministic
}

TEST(MachineDot, EscapesNamesAndAvoidsTheStartNodeName) {
  BuildResult r = Machine("say \"hi\"").initial("__initial").rows({row("__initial", "a\\b", "x\ny")}).build();
  ASSERT_TRUE(r.ok()) << r.format(Severity::kError);
  EXPECT_EQ(to_dot(*r.table),
            "digraph \"say \\\"hi\\\"\" {\n"
            "  rankdir=LR;\n"
            "  node [shape=circle];\n"
            "  \"__initial_\" [shape=point, label=\"\"];\n"
            "  \"__initial\";\n"
            "  \"x\\ny\";\n"
            "  \"__initial_\" -> \"__initial\";\n"
            "  \"__initial\" -> \"x\\ny\" [label=\"a\\\\b\"];\n"
            "}\n");
}

}  // namespace
}  // namespace idem
