// End to end: what the real delayd and delayctl binaries say about
// themselves — --version names delayd's version (and the git commit when
// the build knew it), --help is delayd's own text; neither speaks of the
// machine that built them (no source or build path, no Abseil defaults).
#include <stdio.h>
#include <sys/wait.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"

namespace delayd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr
};

// Runs `binary args` through the shell; no argument needs quoting here.
Output RunBinary(const std::string& binary, const std::string& args) {
  Output result;
  FILE* pipe = popen(absl::StrCat(binary, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) {
    result.text.append(buf, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Nothing of the build: no path of the source or build tree, no Abseil
// defaults.
void ExpectNoBuildDetails(const Output& out) {
  EXPECT_THAT(out.text, Not(HasSubstr(DELAYD_TEST_SOURCE_DIR)));
  EXPECT_THAT(out.text, Not(HasSubstr(DELAYD_TEST_BINARY_DIR)));
  EXPECT_THAT(out.text, Not(HasSubstr(".cc")));
  EXPECT_THAT(out.text, Not(HasSubstr("NDEBUG")));
  EXPECT_THAT(out.text, Not(HasSubstr("Flags from")));
}

std::string Version() {
  const std::string commit = DELAYD_GIT_COMMIT;
  return commit.empty()
             ? DELAYD_VERSION
             : absl::StrCat(DELAYD_VERSION, " (commit ", commit, ")");
}

const std::string& Delayctl() {
  static const std::string path = DELAYCTL_BINARY_PATH;
  return path;
}

TEST(VersionTest, DelaydVersionIsDelaydsOwn) {
  const Output out = RunBinary(DelaydBinary(), "--version");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(out.text, absl::StrCat("delayd ", Version(), "\n"));
  ExpectNoBuildDetails(out);
}

TEST(VersionTest, DelayctlVersionIsDelaydsOwn) {
  const Output out = RunBinary(Delayctl(), "--version");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(out.text, absl::StrCat("delayctl ", Version(), "\n"));
}

TEST(VersionTest, DelaydHelpIsGroupedByPurposeWithDefaultsAndRanges) {
  for (const char* flag : {"--help", "--helpfull", "--helpshort", "-h"}) {
    SCOPED_TRACE(flag);
    const Output out = RunBinary(DelaydBinary(), flag);
    EXPECT_EQ(out.exit_code, 0) << out.text;
    EXPECT_THAT(out.text, StartsWith(absl::StrCat("delayd ", Version())));
    ExpectNoBuildDetails(out);
    for (const char* group : {"Storage:", "Network:", "Timing:", "Limits"}) {
      EXPECT_THAT(out.text, HasSubstr(group));
    }
    EXPECT_THAT(out.text, HasSubstr("--memory-horizon"));
    EXPECT_THAT(out.text, HasSubstr("default: 127.0.0.1:7400"));
  }
}

TEST(VersionTest, DelayctlHelpHasNoBuildDetails) {
  const Output out = RunBinary(Delayctl(), "--help");
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_THAT(out.text, HasSubstr("--version"));
  ExpectNoBuildDetails(out);
}

}  // namespace
}  // namespace delayd::testing
