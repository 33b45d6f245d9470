// Status and StatusOr: ok() is a question on both, value() on an error aborts loudly.
#include "idem/status.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>

namespace idem {
namespace {

TEST(Status, OkIsACheck) {
  EXPECT_TRUE(ok_status().ok());
  EXPECT_TRUE(Status().ok());
  const Status err = unavailable("down");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(unimplemented("no outbox").to_string(), "UNIMPLEMENTED: no outbox");
  EXPECT_EQ(err.to_string(), "UNAVAILABLE: down");
  EXPECT_EQ(ok_status().to_string(), "OK");
}

TEST(StatusOr, ValueOrGivesTheValueOrTheFallback) {
  StatusOr<std::string> good = std::string("v");
  StatusOr<std::string> bad = not_found("nothing here");
  EXPECT_EQ(good.value_or("fallback"), "v");
  EXPECT_EQ(bad.value_or("fallback"), "fallback");
  EXPECT_EQ(StatusOr<int>(7).value_or(1), 7);
  EXPECT_EQ(StatusOr<int>(internal_error("x")).value_or(1), 1);
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

// ok() is the one question: neither converts to bool, so a StatusOr<bool> cannot be
// read as its value by mistake.
static_assert(!std::is_constructible_v<bool, Status>);
static_assert(!std::is_constructible_v<bool, StatusOr<bool>>);
static_assert(std::is_same_v<decltype(std::declval<const StatusOr<int>&>().status()), const Status&>);

TEST(StatusOr, AnOkStatusWithoutAValueIsInternal) {
  StatusOr<int> r = ok_status();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(StatusOr, ConvertsToAStatusOrOfABaseType) {
  struct Base {
    virtual ~Base() = default;
  };
  struct Derived : Base {};
  StatusOr<std::shared_ptr<Base>> good = StatusOr<std::shared_ptr<Derived>>(std::make_shared<Derived>());
  ASSERT_TRUE(good.ok());
  EXPECT_NE(*good, nullptr);
  StatusOr<std::shared_ptr<Base>> bad = StatusOr<std::shared_ptr<Derived>>(unavailable("down"));
  EXPECT_EQ(bad.status().to_string(), "UNAVAILABLE: down");
}

TEST(StatusOr, ValueOfAMoveOnlyTypeMovesOut) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(3);
  std::unique_ptr<int> taken = std::move(p).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 3);
}

TEST(StatusOrDeathTest, ValueOnAnErrorAbortsWithTheStatus) {
  StatusOr<int> bad = unavailable("redis at 127.0.0.1:1 refused");
  EXPECT_DEATH((void)bad.value(), "StatusOr::value\\(\\) on an error: UNAVAILABLE: redis at 127.0.0.1:1 refused");
  EXPECT_DEATH((void)*bad, "UNAVAILABLE");
}

}  // namespace
}  // namespace idem
