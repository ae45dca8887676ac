// What the tests of delayd_auth share: a token hash, and Parse expected to
// accept or to refuse at a line.
#ifndef DELAYD_TESTS_SERVER_AUTH_AUTH_TEST_UTIL_H_
#define DELAYD_TESTS_SERVER_AUTH_AUTH_TEST_UTIL_H_

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/auth_config.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::auth::testing {

// sha256("test").
inline const std::string kTestHash =
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

inline AuthConfig MustParse(const std::string& text) {
  absl::StatusOr<AuthConfig> config = AuthConfig::Parse(text);
  EXPECT_OK(config);
  return config.ok() ? *std::move(config) : AuthConfig();
}

// Parse refuses `text` with "auth file line <line>: " and `what` in the
// message.
inline void ExpectRefused(const std::string& text, int line,
                          const std::string& what) {
  const absl::StatusOr<AuthConfig> config = AuthConfig::Parse(text);
  ASSERT_FALSE(config.ok()) << text;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(config.status().message()),
      ::testing::StartsWith(absl::StrCat("auth file line ", line, ": ")))
      << text;
  EXPECT_THAT(std::string(config.status().message()),
              ::testing::HasSubstr(what))
      << text;
}

// A principal block with a token, before `body`.
inline std::string WithPrincipal(const std::string& body) {
  return absl::StrCat("principal p\ntoken sha256:", kTestHash, "\n", body);
}

}  // namespace delayd::server::auth::testing

#endif  // DELAYD_TESTS_SERVER_AUTH_AUTH_TEST_UTIL_H_
