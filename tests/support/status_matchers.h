// Test helpers for absl::Status and absl::StatusOr, shared by every test.
#ifndef DELAYD_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define DELAYD_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace delayd::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace delayd::testing

#define EXPECT_OK(expr) \
  EXPECT_EQ(::delayd::testing::GetStatus(expr), absl::OkStatus())
#define ASSERT_OK(expr) \
  ASSERT_EQ(::delayd::testing::GetStatus(expr), absl::OkStatus())

#define DELAYD_CONCAT_INNER_(a, b) a##b
#define DELAYD_CONCAT_(a, b) DELAYD_CONCAT_INNER_(a, b)

// ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr): fails the test on an error,
// else moves the value into x.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(DELAYD_CONCAT_(statusor_, __LINE__), lhs, rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  ASSERT_OK(statusor);                                   \
  lhs = std::move(statusor).value()

#endif  // DELAYD_TESTS_SUPPORT_STATUS_MATCHERS_H_
