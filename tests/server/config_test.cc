// Config precedence: file < DELAYD_* environment < command line, and flag
// names taking '-' or '_'.
#include "server/config.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;

TEST(ConfigTest, EnvironmentComesBeforeTheCommandLine) {
  ASSERT_OK_AND_ASSIGN(auto merged,
                       MergeSettings({"--data-dir=/from/args", "--sync=none"},
                                     {"PATH=/bin", "DELAYD_DATA_DIR=/from/env",
                                      "DELAYD_LISTEN=0.0.0.0:1"}));
  EXPECT_THAT(merged, ElementsAre("--data_dir=/from/env", "--listen=0.0.0.0:1",
                                  "--data_dir=/from/args", "--sync=none"));
}

TEST(ConfigTest, EnvironmentVariablesThatNameNoFlagAreIgnored) {
  ASSERT_OK_AND_ASSIGN(auto merged, MergeSettings({}, {"DELAYD_CRASH_ROUNDS=3",
                                                       "DELAYD_SYNC=none"}));
  EXPECT_THAT(merged, ElementsAre("--sync=none"));
}

TEST(ConfigTest, RetentionIsReadFromTheEnvironment) {
  ASSERT_OK_AND_ASSIGN(auto merged,
                       MergeSettings({}, {"DELAYD_RETENTION=90s"}));
  EXPECT_THAT(merged, ElementsAre("--retention=90s"));
}

TEST(ConfigTest, ConfigFileComesFirst) {
  const std::string dir = delayd::testing::MakeTempDir();
  const std::string path = dir + "/delayd.conf";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("# comment\n\nmetrics-listen = 127.0.0.1:1\n--sync=none\n", f);
  std::fclose(f);
  ASSERT_OK_AND_ASSIGN(auto merged,
                       MergeSettings({"--listen=x:1"}, {"DELAYD_CONFIG=" + path,
                                                        "DELAYD_SYNC=always"}));
  EXPECT_THAT(merged, ElementsAre("--metrics_listen=127.0.0.1:1", "--sync=none",
                                  "--sync=always", "--listen=x:1"));
}

TEST(ConfigTest, UnreadableConfigFileIsRefused) {
  auto merged = MergeSettings({"--config=/nonexistent/delayd.conf"}, {});
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(merged.status().message()),
              ::testing::HasSubstr("--config: cannot read"));
}

TEST(ConfigTest, MalformedConfigLineNamesTheLine) {
  const std::string path = delayd::testing::MakeTempDir() + "/bad.conf";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("listen = a:1\nnonsense\n", f);
  std::fclose(f);
  auto merged = MergeSettings({"--config=" + path}, {});
  EXPECT_THAT(std::string(merged.status().message()),
              ::testing::HasSubstr("bad.conf:2: expected `name = value`"));
}

}  // namespace
}  // namespace delayd::server
