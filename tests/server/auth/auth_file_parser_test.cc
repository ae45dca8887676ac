// The auth file's grammar, through AuthConfig::Parse: what it accepts
// (quotas, CRLF, upper-case hashes, runs of stars) and every refusal, each
// with its line number.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/auth_config.h"
#include "tests/server/auth/auth_test_util.h"

namespace delayd::server::auth {
namespace {

using ::testing::ElementsAre;
using testing::ExpectRefused;
using ::testing::HasSubstr;
using testing::kTestHash;
using testing::MustParse;
using testing::WithPrincipal;

TEST(AuthConfigTest, UpperCaseTokenHashIsStoredLowerCase) {
  const std::string upper = absl::AsciiStrToUpper(kTestHash);
  const AuthConfig config =
      MustParse(absl::StrCat("principal p\n  token sha256:", upper, "\n"));
  EXPECT_THAT(config.principals()[0].token_hashes, ElementsAre(kTestHash));
  EXPECT_NE(config.FindByToken("test"), nullptr);
}

TEST(AuthConfigTest, CrlfLineEndsAndRunsOfStars) {
  const AuthConfig config =
      MustParse(absl::StrCat("principal p\r\ntoken sha256:", kTestHash,
                             "\r\ngrant read a**b***\r\ngrant cancel **\r\n"));
  const Principal& p = config.principals()[0];
  EXPECT_THAT(p.token_hashes, ElementsAre(kTestHash));
  ASSERT_EQ(p.grants.size(), 2u);
  EXPECT_EQ(p.grants[0].pattern, "a*b*");
  EXPECT_EQ(p.grants[1].pattern, "*");
  EXPECT_TRUE(p.AllowsEverywhere(Permission::kCancel));
}

TEST(AuthConfigTest, QuotasParse) {
  const AuthConfig config =
      MustParse(WithPrincipal("quota schedules_per_second 500 burst 2000\n"
                              "quota pending orders.** 100000\n"
                              "quota pending billing.x 0\n"
                              "quota pending_bytes orders.* 1000000\n"
                              "quota pending_bytes orders.close 0\n"
                              "quota pending_bytes billing.x 1000000000000000\n"
                              "quota subscriptions 4\n"));
  const Quotas& q = config.principals()[0].quotas;
  EXPECT_EQ(q.schedules_per_second, 500);
  EXPECT_EQ(q.burst, 2000);
  ASSERT_EQ(q.pending.size(), 2u);
  EXPECT_EQ(q.pending[0].pattern, "orders.*");
  EXPECT_EQ(q.pending[0].limit, 100000);
  EXPECT_EQ(q.pending[1].pattern, "billing.x");
  EXPECT_EQ(q.pending[1].limit, 0);
  ASSERT_EQ(q.pending_bytes.size(), 3u);
  EXPECT_EQ(q.pending_bytes[0].pattern, "orders.*");
  EXPECT_EQ(q.pending_bytes[0].limit, 1'000'000);
  EXPECT_EQ(q.pending_bytes[1].pattern, "orders.close");
  EXPECT_EQ(q.pending_bytes[1].limit, 0);
  EXPECT_EQ(q.pending_bytes[2].limit, 1'000'000'000'000'000);
  EXPECT_EQ(q.subscriptions, 4);
  // Burst defaults to the rate; no quota line: no limit.
  const AuthConfig plain =
      MustParse(WithPrincipal("quota schedules_per_second 7\n"));
  EXPECT_EQ(plain.principals()[0].quotas.burst, 7);
  EXPECT_EQ(plain.principals()[0].quotas.subscriptions, -1);
  EXPECT_TRUE(plain.principals()[0].quotas.pending.empty());
  EXPECT_TRUE(plain.principals()[0].quotas.pending_bytes.empty());
}

TEST(AuthConfigRefusalTest, BadQuotas) {
  ExpectRefused(WithPrincipal("quota\n"), 3, "quota takes a kind");
  ExpectRefused(WithPrincipal("quota bandwidth 5\n"), 3,
                "unknown quota \"bandwidth\" (known: schedules_per_second, "
                "pending, pending_bytes, subscriptions)");
  ExpectRefused(WithPrincipal("quota schedules_per_second 0\n"), 3,
                "schedules_per_second must be a whole number from 1 to "
                "1000000000, got \"0\"");
  ExpectRefused(WithPrincipal("quota schedules_per_second 1.5\n"), 3,
                "whole number");
  ExpectRefused(WithPrincipal("quota schedules_per_second 5 burst\n"), 3,
                "takes RATE, or RATE burst N");
  ExpectRefused(WithPrincipal("quota schedules_per_second 5 burst -1\n"), 3,
                "burst must be");
  ExpectRefused(WithPrincipal("quota schedules_per_second 5\n"
                              "quota schedules_per_second 6\n"),
                4, "given twice");
  ExpectRefused(WithPrincipal("quota pending orders.*\n"), 3,
                "quota pending takes PATTERN N");
  ExpectRefused(WithPrincipal("quota pending a/b 5\n"), 3,
                "quota pending pattern \"a/b\" holds");
  ExpectRefused(WithPrincipal("quota pending a 1\nquota pending a 2\n"), 4,
                "given twice");
  ExpectRefused(WithPrincipal("quota pending a 99999999999999999999\n"), 3,
                "from 0 to 1000000000000");
  ExpectRefused(WithPrincipal("quota pending_bytes orders.*\n"), 3,
                "quota pending_bytes takes PATTERN N");
  ExpectRefused(WithPrincipal("quota pending_bytes a/b 5\n"), 3,
                "quota pending_bytes pattern \"a/b\" holds");
  // One per pattern and kind: pending and pending_bytes of one pattern
  // are two quotas.
  ExpectRefused(WithPrincipal("quota pending a 1\nquota pending_bytes a 2\n"
                              "quota pending_bytes a 3\n"),
                5, "quota pending_bytes \"a\" is given twice");
  ExpectRefused(WithPrincipal("quota pending_bytes a 1000000000000001\n"), 3,
                "from 0 to 1000000000000000");
  ExpectRefused(WithPrincipal("quota pending_bytes a 64MiB\n"), 3,
                "whole number");
  ExpectRefused(WithPrincipal("quota subscriptions 1000001\n"), 3,
                "from 0 to 1000000");
  ExpectRefused(WithPrincipal("quota subscriptions 1\nquota subscriptions 1\n"),
                4, "given twice");
}

TEST(AuthConfigRefusalTest, DirectiveBeforeAnyPrincipal) {
  ExpectRefused(absl::StrCat("# header\n\ntoken sha256:", kTestHash, "\n"), 3,
                "token before any principal");
  ExpectRefused("grant read *\n", 1, "grant before any principal");
}

TEST(AuthConfigRefusalTest, UnknownDirectiveListsTheKnownOnes) {
  ExpectRefused(WithPrincipal("grnat read *\n"), 3,
                "unknown directive \"grnat\" (known: principal, token, "
                "identity, grant, quota)");
  ExpectRefused("Principal p\n", 1, "unknown directive \"Principal\"");
}

TEST(AuthConfigRefusalTest, WrongNumberOfArguments) {
  ExpectRefused("principal\n", 1, "principal takes 1 argument");
  ExpectRefused("principal a b\n", 1, "got 2");
  ExpectRefused("principal p\ntoken\n", 2, "token takes 1 argument");
  ExpectRefused(absl::StrCat("principal p\ntoken sha256:", kTestHash, " x\n"),
                2, "token takes 1 argument");
  ExpectRefused(WithPrincipal("grant read\n"), 3, "grant takes 2 arguments");
  ExpectRefused(WithPrincipal("grant read a b\n"), 3, "got 3");
}

TEST(AuthConfigRefusalTest, BadPrincipalName) {
  ExpectRefused(absl::StrCat("principal ", std::string(65, 'n'), "\n"), 1,
                "principal name is 65 bytes, over the limit of 64");
  ExpectRefused("principal orders/service\n", 1,
                "principal name \"orders/service\" holds '/'");
  ExpectRefused("principal caf\xc3\xa9\n", 1,
                "holds '\\xc3': a name is 1-64 bytes of [A-Za-z0-9._:@-]");
  // 64 bytes and every allowed character are fine.
  EXPECT_OK(AuthConfig::Parse(
      absl::StrCat("principal ", std::string(64, 'n'), "\nidentity a\n",
                   "principal aZ09._:@-\nidentity b\n")));
}

TEST(AuthConfigRefusalTest, DuplicatePrincipalName) {
  ExpectRefused(absl::StrCat(WithPrincipal(""), "principal q\nidentity q\n",
                             "principal p\n"),
                5, "principal \"p\" is already defined on line 1");
}

TEST(AuthConfigRefusalTest, PlainTextTokenSaysToStoreItsHash) {
  const absl::StatusOr<AuthConfig> config =
      AuthConfig::Parse("principal p\ntoken hunter2-secret\n");
  ExpectRefused("principal p\ntoken hunter2-secret\n", 2,
                "printf %s \"$TOKEN\" | sha256sum");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              Not(HasSubstr("hunter2")));
  // The prefix is lower case.
  ExpectRefused(absl::StrCat("principal p\ntoken SHA256:", kTestHash, "\n"), 2,
                "store its SHA-256");
}

TEST(AuthConfigRefusalTest, MalformedTokenHash) {
  ExpectRefused("principal p\ntoken sha256:abc\n", 2,
                "exactly 64 hex digits; it has 3 characters");
  ExpectRefused(absl::StrCat("principal p\ntoken sha256:", kTestHash, "0\n"), 2,
                "it has 65 characters");
  std::string not_hex(kTestHash);
  not_hex[10] = 'g';
  ExpectRefused(absl::StrCat("principal p\ntoken sha256:", not_hex, "\n"), 2,
                "not all hex digits");
  ExpectRefused("principal p\ntoken sha256:\n", 2, "it has 0 characters");
}

TEST(AuthConfigRefusalTest, SameTokenHashTwice) {
  ExpectRefused(absl::StrCat(WithPrincipal(""),
                             "principal q\ntoken sha256:", kTestHash, "\n"),
                4,
                "the same token is already held by principal \"p\" (line 2)");
  // Upper case is the same hash.
  const std::string upper = absl::AsciiStrToUpper(kTestHash);
  ExpectRefused(WithPrincipal(absl::StrCat("token sha256:", upper, "\n")), 3,
                "the same token is listed twice (also on line 2)");
}

TEST(AuthConfigRefusalTest, BadOrDuplicateIdentity) {
  ExpectRefused("principal p\nidentity\n", 2, "identity is empty");
  ExpectRefused("principal p\nidentity    # only a comment\n", 2,
                "identity is empty");
  ExpectRefused(
      absl::StrCat("principal p\nidentity ", std::string(1025, 'i'), "\n"), 2,
      "identity is 1025 bytes, over the limit of 1024");
  EXPECT_OK(AuthConfig::Parse(
      absl::StrCat("principal p\nidentity ", std::string(1024, 'i'), "\n")));
  ExpectRefused(
      "principal p\nidentity a.b\nprincipal q\nidentity a.b\n", 4,
      "the same identity is already held by principal \"p\" (line 2)");
  ExpectRefused("principal p\nidentity a.b\nidentity  a.b \n", 3,
                "the same identity is listed twice (also on line 2)");
}

TEST(AuthConfigRefusalTest, BadPermissions) {
  ExpectRefused(WithPrincipal("grant read,write orders.*\n"), 3,
                "unknown permission \"write\" (known: schedule, cancel, read, "
                "consume, admin)");
  ExpectRefused(WithPrincipal("grant Read orders.*\n"), 3,
                "unknown permission \"Read\"");
  ExpectRefused(WithPrincipal("grant , orders.*\n"), 3,
                "empty permission list");
  ExpectRefused(WithPrincipal("grant read,,cancel orders.*\n"), 3,
                "has an empty entry");
  ExpectRefused(WithPrincipal("grant read, orders.*\n"), 3,
                "has an empty entry");
}

TEST(AuthConfigRefusalTest, BadGrantPattern) {
  ExpectRefused(
      WithPrincipal(absl::StrCat("grant read ", std::string(129, 'x'), "\n")),
      3, "grant pattern is 129 bytes, over the limit of 128");
  EXPECT_OK(AuthConfig::Parse(
      WithPrincipal(absl::StrCat("grant read ", std::string(128, 'x'), "\n"))));
  ExpectRefused(WithPrincipal("grant read orders/eu\n"), 3,
                "grant pattern \"orders/eu\" holds '/'");
  ExpectRefused(WithPrincipal("grant read orders.?\n"), 3,
                "[A-Za-z0-9._:-] and '*'");
  ExpectRefused(WithPrincipal("grant read orders@x\n"), 3, "holds '@'");
  // A '#' that starts a word is a comment, leaving the pattern out.
  ExpectRefused(WithPrincipal("grant read #orders\n"), 3,
                "grant takes 2 arguments");
}

TEST(AuthConfigRefusalTest, PrincipalWithoutTokenOrIdentity) {
  ExpectRefused("principal p\ngrant read *\nprincipal q\nidentity q\n", 1,
                "principal \"p\" has no token and no identity");
  // The last principal is checked at the end of the file.
  ExpectRefused(absl::StrCat(WithPrincipal(""), "\n# end\nprincipal q\n"), 5,
                "principal \"q\" has no token and no identity");
}

TEST(AuthConfigRefusalTest, LineTooLong) {
  const std::string comment = "#" + std::string(4095, 'c');
  EXPECT_OK(AuthConfig::Parse(WithPrincipal(comment + "\n")));
  ExpectRefused(WithPrincipal(comment + "c\n"), 3,
                "the line is 4097 bytes, over the limit of 4096");
  // A CRLF line end does not count.
  EXPECT_OK(AuthConfig::Parse(WithPrincipal(comment + "\r\n")));
}

TEST(AuthConfigRefusalTest, NulOrInvalidUtf8) {
  ExpectRefused(WithPrincipal(std::string("# a\0b\n", 6)), 3, "NUL byte");
  ExpectRefused(WithPrincipal("identity caf\xc3\n"), 3,
                "not valid UTF-8 (at byte 13)");
  ExpectRefused(WithPrincipal("# \xff\n"), 3, "not valid UTF-8");
  // Overlong '/', a UTF-16 surrogate, past U+10FFFF.
  ExpectRefused(WithPrincipal("# \xc0\xaf\n"), 3, "not valid UTF-8");
  ExpectRefused(WithPrincipal("# \xed\xa0\x80\n"), 3, "not valid UTF-8");
  ExpectRefused(WithPrincipal("# \xf4\x90\x80\x80\n"), 3, "not valid UTF-8");
  // Valid UTF-8 is fine, in an identity too.
  const AuthConfig config = MustParse(WithPrincipal(
      "# caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\nidentity Caf\xc3\xa9\n"));
  EXPECT_NE(config.FindByIdentity("Caf\xc3\xa9"), nullptr);
}

}  // namespace
}  // namespace delayd::server::auth
