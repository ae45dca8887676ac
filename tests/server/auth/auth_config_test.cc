// AuthConfig, TopicMatches and Sha256Hex: the auth file's example, its
// lookups, topic globs (including a pattern that would backtrack
// exponentially), grants and admin, every refusal with its line number, and
// Load from disk.
#include "server/auth/auth_config.h"

#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::auth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr uint32_t kSchedule = static_cast<uint32_t>(Permission::kSchedule);
constexpr uint32_t kCancel = static_cast<uint32_t>(Permission::kCancel);
constexpr uint32_t kRead = static_cast<uint32_t>(Permission::kRead);
constexpr uint32_t kConsume = static_cast<uint32_t>(Permission::kConsume);
constexpr uint32_t kAdmin = static_cast<uint32_t>(Permission::kAdmin);

// sha256("test") and sha256("ops-token").
const std::string kTestHash =
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const std::string kOpsHash = Sha256Hex("ops-token");

// The header's example, with a second token and the comments it shows.
std::string Example() {
  return absl::StrCat(
      "# delayd auth file.\n"
      "principal orders-service        # starts the block of one principal\n"
      "  token sha256:",
      kTestHash,
      "\n"
      "  identity orders.svc.internal  # a SAN or the CN\n"
      "  grant schedule,cancel,read orders.*\n"
      "  grant consume orders.*\n"
      "\n"
      "principal ops\n"
      "\ttoken sha256:",
      kOpsHash,
      "\n"
      "\tidentity CN of the ops team   # the rest of the line\n"
      "\tgrant admin *\n");
}

AuthConfig MustParse(const std::string& text) {
  absl::StatusOr<AuthConfig> config = AuthConfig::Parse(text);
  EXPECT_OK(config);
  return config.ok() ? *std::move(config) : AuthConfig();
}

// Parse refuses `text` with "auth file line <line>: " and `what` in the
// message.
void ExpectRefused(const std::string& text, int line, const std::string& what) {
  const absl::StatusOr<AuthConfig> config = AuthConfig::Parse(text);
  ASSERT_FALSE(config.ok()) << text;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith(absl::StrCat("auth file line ", line, ": ")))
      << text;
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(what)) << text;
}

// A principal block with a token, before `body`.
std::string WithPrincipal(const std::string& body) {
  return absl::StrCat("principal p\ntoken sha256:", kTestHash, "\n", body);
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/auth_config_test_", getpid(), "_",
                      name);
}

void WriteFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  ASSERT_TRUE(out.good()) << path;
}

TEST(AuthConfigTest, ExampleParsesIntoItsPrincipalsAndGrants) {
  const AuthConfig config = MustParse(Example());
  ASSERT_EQ(config.principals().size(), 2u);

  const Principal& orders = config.principals()[0];
  EXPECT_EQ(orders.name, "orders-service");
  EXPECT_THAT(orders.token_hashes, ElementsAre(kTestHash));
  EXPECT_THAT(orders.identities, ElementsAre("orders.svc.internal"));
  ASSERT_EQ(orders.grants.size(), 2u);
  EXPECT_EQ(orders.grants[0].pattern, "orders.*");
  EXPECT_EQ(orders.grants[0].permissions, kSchedule | kCancel | kRead);
  EXPECT_EQ(orders.grants[1].pattern, "orders.*");
  EXPECT_EQ(orders.grants[1].permissions, kConsume);

  const Principal& ops = config.principals()[1];
  EXPECT_EQ(ops.name, "ops");
  EXPECT_THAT(ops.token_hashes, ElementsAre(kOpsHash));
  EXPECT_THAT(ops.identities, ElementsAre("CN of the ops team"));
  ASSERT_EQ(ops.grants.size(), 1u);
  EXPECT_EQ(ops.grants[0].pattern, "*");
  EXPECT_EQ(ops.grants[0].permissions, kAdmin);
}

TEST(AuthConfigTest, EmptyFileHasNoPrincipal) {
  EXPECT_THAT(MustParse("").principals(), IsEmpty());
  EXPECT_THAT(MustParse("# nothing yet\n\n   \n").principals(), IsEmpty());
  EXPECT_EQ(AuthConfig().FindByToken("test"), nullptr);
}

TEST(AuthConfigTest, FindByTokenComparesTheTokensHash) {
  const AuthConfig config = MustParse(Example());
  const Principal* orders = config.FindByToken("test");
  ASSERT_NE(orders, nullptr);
  EXPECT_EQ(orders->name, "orders-service");
  const Principal* ops = config.FindByToken("ops-token");
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->name, "ops");

  EXPECT_EQ(config.FindByToken("wrong"), nullptr);
  EXPECT_EQ(config.FindByToken("test "), nullptr);
  EXPECT_EQ(config.FindByToken(""), nullptr);
  // What the file stores is not itself a token.
  EXPECT_EQ(config.FindByToken(kTestHash), nullptr);
  EXPECT_EQ(config.FindByToken(absl::StrCat("sha256:", kTestHash)), nullptr);
}

TEST(AuthConfigTest, FindByIdentityIsExact) {
  const AuthConfig config = MustParse(Example());
  const Principal* orders = config.FindByIdentity("orders.svc.internal");
  ASSERT_NE(orders, nullptr);
  EXPECT_EQ(orders->name, "orders-service");
  const Principal* ops = config.FindByIdentity("CN of the ops team");
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->name, "ops");

  EXPECT_EQ(config.FindByIdentity("ORDERS.svc.internal"), nullptr);
  EXPECT_EQ(config.FindByIdentity("orders.svc.internal "), nullptr);
  EXPECT_EQ(config.FindByIdentity("orders"), nullptr);
  EXPECT_EQ(config.FindByIdentity(""), nullptr);
  EXPECT_EQ(config.FindByIdentity("test"), nullptr);
}

TEST(AuthConfigTest, CopiesAndMovesKeepTheirLookups) {
  AuthConfig original = MustParse(Example());
  const AuthConfig copy = original;
  const AuthConfig moved = std::move(original);
  for (const AuthConfig* config : {&copy, &moved}) {
    const Principal* ops = config->FindByToken("ops-token");
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(ops, &config->principals()[1]);
    EXPECT_EQ(config->FindByIdentity("orders.svc.internal"),
              &config->principals()[0]);
  }
}

TEST(AuthConfigTest, UpperCaseTokenHashIsStoredLowerCase) {
  const std::string upper = absl::AsciiStrToUpper(kTestHash);
  const AuthConfig config =
      MustParse(absl::StrCat("principal p\n  token sha256:", upper, "\n"));
  EXPECT_THAT(config.principals()[0].token_hashes, ElementsAre(kTestHash));
  EXPECT_NE(config.FindByToken("test"), nullptr);
}

TEST(AuthConfigTest, SeveralTokensAndIdentitiesPerPrincipal) {
  const AuthConfig config =
      MustParse(absl::StrCat("principal p\n"
                             "token sha256:",
                             kTestHash, "\ntoken sha256:", kOpsHash,
                             "\n"
                             "identity spiffe://example.org/ns/orders#frag\n"
                             "identity 10.0.0.7\n"));
  const Principal& p = config.principals()[0];
  EXPECT_THAT(p.token_hashes, ElementsAre(kTestHash, kOpsHash));
  // A '#' inside a word is no comment.
  EXPECT_THAT(p.identities,
              ElementsAre("spiffe://example.org/ns/orders#frag", "10.0.0.7"));
  EXPECT_EQ(config.FindByToken("test"), &p);
  EXPECT_EQ(config.FindByToken("ops-token"), &p);
  EXPECT_EQ(config.FindByIdentity("10.0.0.7"), &p);
}

TEST(AuthConfigTest, PrincipalWithNoGrantAuthenticatesAndIsDeniedEverything) {
  const AuthConfig config =
      MustParse("principal nobody@example.org\nidentity nobody\n");
  const Principal* p = config.FindByIdentity("nobody");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->name, "nobody@example.org");
  EXPECT_FALSE(p->Allows(Permission::kRead, "orders.x"));
  EXPECT_FALSE(p->AllowsEverywhere(Permission::kRead));
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

TEST(PermissionTest, Names) {
  EXPECT_EQ(PermissionName(Permission::kSchedule), "schedule");
  EXPECT_EQ(PermissionName(Permission::kCancel), "cancel");
  EXPECT_EQ(PermissionName(Permission::kRead), "read");
  EXPECT_EQ(PermissionName(Permission::kConsume), "consume");
  EXPECT_EQ(PermissionName(Permission::kAdmin), "admin");
  EXPECT_EQ(PermissionName(static_cast<Permission>(3)), "unknown");
}

TEST(Sha256HexTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("test"), kTestHash);
  EXPECT_EQ(Sha256Hex(std::string_view("a\0b", 3)),
            Sha256Hex(std::string("a\0b", 3)));
}

TEST(TopicMatchesTest, Table) {
  struct Case {
    std::string_view pattern;
    std::string_view topic;
    bool matches;
  };
  const Case cases[] = {
      // Exact.
      {"orders", "orders", true},
      {"orders", "orders.eu", false},
      {"orders", "order", false},
      {"orders", "", false},
      {"", "", true},
      {"", "x", false},
      // Prefix.
      {"orders.*", "orders.eu", true},
      {"orders.*", "orders.", true},
      {"orders.*", "orders", false},
      {"orders.*", "billing.x", false},
      {"orders.*", "xorders.eu", false},
      // Everything.
      {"*", "", true},
      {"*", "anything.at:all", true},
      {"**", "x", true},
      // Suffix and middle.
      {"*.dlq", "orders.dlq", true},
      {"*.dlq", "orders.dlq.x", false},
      {"a*b", "ab", true},
      {"a*b", "axxb", true},
      {"a*b", "axxbx", false},
      {"a*b", "b", false},
      {"a*a", "a", false},
      {"a*a", "aa", true},
      // Several stars.
      {"*a*b*", "xxaxxbxx", true},
      {"*a*b*", "xxbxxaxx", false},
      {"a*b*c", "abc", true},
      {"a*b*c", "aXbYbZc", true},
      {"a*b*c", "acb", false},
      {"*ab*ab*", "abab", true},
      {"*ab*ab*", "aba", false},
      {"*aab*", "aaab", true},  // KMP's fallback inside a piece
      {"*abcabd*", "abcabcabd", true},
      {"o*.*.q", "orders.eu.q", true},
      {"o*.*.q", "orders.q", false},
      // Empty topic.
      {"a*", "", false},
      {"*a*", "", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TopicMatches(c.pattern, c.topic), c.matches)
        << "pattern " << c.pattern << ", topic " << c.topic;
  }
}

// The glob by dynamic programming: whether pattern[i:] matches topic[j:].
bool ReferenceMatches(std::string_view pattern, std::string_view topic) {
  std::vector<std::vector<bool>> m(pattern.size() + 1,
                                   std::vector<bool>(topic.size() + 1));
  m[pattern.size()][topic.size()] = true;
  for (size_t i = pattern.size(); i-- > 0;) {
    for (size_t j = topic.size() + 1; j-- > 0;) {
      m[i][j] =
          pattern[i] == '*'
              ? m[i + 1][j] || (j < topic.size() && m[i][j + 1])
              : j < topic.size() && pattern[i] == topic[j] && m[i + 1][j + 1];
    }
  }
  return m[0][0];
}

TEST(TopicMatchesTest, AgreesWithDynamicProgramming) {
  std::mt19937 random(14);
  const auto draw = [&random](std::string_view alphabet, size_t max_size) {
    std::string s(random() % (max_size + 1), ' ');
    for (char& c : s) c = alphabet[random() % alphabet.size()];
    return s;
  };
  for (int i = 0; i < 20000; ++i) {
    const std::string pattern = draw("ab*", 8);
    const std::string topic = draw("ab", 10);
    ASSERT_EQ(TopicMatches(pattern, topic), ReferenceMatches(pattern, topic))
        << "pattern " << pattern << ", topic " << topic;
  }
}

TEST(TopicMatchesTest, PathologicalPatternCompletes) {
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "*a";
  pattern += "b";
  const std::string topic(1000, 'a');
  // Exponential backtracking would not return within the test's lifetime.
  EXPECT_FALSE(TopicMatches(pattern, topic));
  EXPECT_TRUE(TopicMatches(pattern, topic + "b"));
  EXPECT_FALSE(TopicMatches(pattern, std::string(29, 'a') + "b"));
  EXPECT_TRUE(TopicMatches(pattern, std::string(30, 'a') + "b"));
}

TEST(PrincipalTest, AllowsByPermissionAndTopic) {
  const AuthConfig config = MustParse(Example());
  const Principal& orders = config.principals()[0];
  EXPECT_TRUE(orders.Allows(Permission::kSchedule, "orders.eu"));
  EXPECT_TRUE(orders.Allows(Permission::kCancel, "orders.eu"));
  EXPECT_TRUE(orders.Allows(Permission::kRead, "orders.eu"));
  EXPECT_TRUE(orders.Allows(Permission::kConsume, "orders.eu"));
  EXPECT_FALSE(orders.Allows(Permission::kAdmin, "orders.eu"));
  // orders.* does not cover other topics, nor the bare prefix.
  EXPECT_FALSE(orders.Allows(Permission::kSchedule, "billing.x"));
  EXPECT_FALSE(orders.Allows(Permission::kRead, "orders"));
  for (const Permission p :
       {Permission::kSchedule, Permission::kCancel, Permission::kRead,
        Permission::kConsume, Permission::kAdmin}) {
    EXPECT_FALSE(orders.AllowsEverywhere(p)) << PermissionName(p);
  }
}

TEST(PrincipalTest, AdminImpliesEveryOtherPermissionOnItsTopics) {
  const AuthConfig config = MustParse(Example());
  const Principal& ops = config.principals()[1];
  for (const Permission p :
       {Permission::kSchedule, Permission::kCancel, Permission::kRead,
        Permission::kConsume, Permission::kAdmin}) {
    EXPECT_TRUE(ops.Allows(p, "billing.x")) << PermissionName(p);
    EXPECT_TRUE(ops.AllowsEverywhere(p)) << PermissionName(p);
  }

  Principal scoped;
  scoped.name = "scoped";
  scoped.identities = {"scoped"};
  scoped.grants = {{.pattern = "billing.*", .permissions = kAdmin},
                   {.pattern = "*", .permissions = kRead}};
  EXPECT_TRUE(scoped.Allows(Permission::kCancel, "billing.x"));
  EXPECT_FALSE(scoped.Allows(Permission::kCancel, "orders.x"));
  EXPECT_TRUE(scoped.Allows(Permission::kRead, "orders.x"));
  EXPECT_TRUE(scoped.AllowsEverywhere(Permission::kRead));
  EXPECT_FALSE(scoped.AllowsEverywhere(Permission::kCancel));
  EXPECT_FALSE(scoped.AllowsEverywhere(Permission::kAdmin));
}

TEST(AuthConfigTest, QuotasParse) {
  const AuthConfig config =
      MustParse(WithPrincipal("quota schedules_per_second 500 burst 2000\n"
                              "quota pending orders.** 100000\n"
                              "quota pending billing.x 0\n"
                              "quota subscriptions 4\n"));
  const Quotas& q = config.principals()[0].quotas;
  EXPECT_EQ(q.schedules_per_second, 500);
  EXPECT_EQ(q.burst, 2000);
  ASSERT_EQ(q.pending.size(), 2u);
  EXPECT_EQ(q.pending[0].pattern, "orders.*");
  EXPECT_EQ(q.pending[0].max_jobs, 100000);
  EXPECT_EQ(q.pending[1].pattern, "billing.x");
  EXPECT_EQ(q.pending[1].max_jobs, 0);
  EXPECT_EQ(q.subscriptions, 4);
  // Burst defaults to the rate; no quota line: no limit.
  const AuthConfig plain =
      MustParse(WithPrincipal("quota schedules_per_second 7\n"));
  EXPECT_EQ(plain.principals()[0].quotas.burst, 7);
  EXPECT_EQ(plain.principals()[0].quotas.subscriptions, -1);
  EXPECT_TRUE(plain.principals()[0].quotas.pending.empty());
}

TEST(AuthConfigRefusalTest, BadQuotas) {
  ExpectRefused(WithPrincipal("quota\n"), 3, "quota takes a kind");
  ExpectRefused(WithPrincipal("quota bandwidth 5\n"), 3,
                "unknown quota \"bandwidth\" (known: schedules_per_second, "
                "pending, subscriptions)");
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

TEST(AuthConfigLoadTest, ReadsAFile) {
  const std::string path = TempPath("ok");
  WriteFile(path, Example());
  const absl::StatusOr<AuthConfig> config = AuthConfig::Load(path);
  ASSERT_OK(config);
  ASSERT_EQ(config->principals().size(), 2u);
  EXPECT_EQ(config->FindByToken("ops-token"), &config->principals()[1]);
  unlink(path.c_str());
}

TEST(AuthConfigLoadTest, MissingFileNamesThePath) {
  const std::string path = TempPath("missing");
  const absl::StatusOr<AuthConfig> config = AuthConfig::Load(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));
}

TEST(AuthConfigLoadTest, ParseErrorNamesThePathAndLine) {
  const std::string path = TempPath("bad");
  WriteFile(path, "principal p\nfoo\n");
  const absl::StatusOr<AuthConfig> config = AuthConfig::Load(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith(absl::StrCat(path, ": auth file line 2: ")));
  unlink(path.c_str());
}

TEST(AuthConfigLoadTest, RefusesAFileOverTheLimit) {
  const std::string path = TempPath("big");
  std::string text = WithPrincipal("");
  text.resize(kMaxFileBytes, '\n');
  WriteFile(path, text);
  EXPECT_OK(AuthConfig::Load(path));
  WriteFile(path, text + "\n");
  const absl::StatusOr<AuthConfig> config = AuthConfig::Load(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("4 MiB (4194304 bytes)"));
  unlink(path.c_str());
}

TEST(AuthConfigLoadTest, RefusesADirectory) {
  const absl::StatusOr<AuthConfig> config =
      AuthConfig::Load(::testing::TempDir());
  EXPECT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(::testing::TempDir()));
}

}  // namespace
}  // namespace delayd::server::auth
