// AuthConfig: the header's example parsed into its principals, the
// lookups by token hash and identity, grants and admin, PermissionName,
// Sha256Hex, and Load from disk.
#include "server/auth/auth_config.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/auth/auth_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::auth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kTestHash;
using testing::MustParse;
using ::testing::Not;
using ::testing::StartsWith;
using testing::WithPrincipal;

constexpr uint32_t kSchedule = static_cast<uint32_t>(Permission::kSchedule);
constexpr uint32_t kCancel = static_cast<uint32_t>(Permission::kCancel);
constexpr uint32_t kRead = static_cast<uint32_t>(Permission::kRead);
constexpr uint32_t kConsume = static_cast<uint32_t>(Permission::kConsume);
constexpr uint32_t kAdmin = static_cast<uint32_t>(Permission::kAdmin);

// sha256("ops-token").
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
