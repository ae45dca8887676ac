// Config precedence: file < DELAYD_* environment < command line, and flag
// names taking '-' or '_'.
#include "server/config.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

// Every duration and size flag at and around its bounds: a value in range
// is taken as given, one outside (or unreadable) is refused naming the flag
// — never accepted. Ranges as documented in --help and docs/design.md.
struct Case {
  std::string value;
  bool accepted;
};

struct FlagCases {
  std::string flag;  // '_' form, as errors name it
  std::vector<Case> cases;
};

// The boundary values every flag of a kind gets, on top of its own.
std::vector<Case> DurationExtremes() {
  return {{"-1s", false},
          {"-inf", false},
          {"inf", false},
          {"9223372036854775807s", false},
          {"2562047788015215h", false},
          {"1e300s", false},
          {"nonsense", false}};
}
std::vector<Case> SizeExtremes() {
  return {{"-1", false},
          {"4294967296", false},
          {"9223372036854775807", false},
          {"18446744073709551616", false},
          {"inf", false},
          {"1e300", false}};
}

std::vector<FlagCases> AllCases() {
  std::vector<FlagCases> all = {
      {"memory_horizon",
       {{"0", true},
        {"999ms", false},
        {"1s", true},
        {"8760h", true},
        {"8760h1ms", false}}},
      {"retention", {{"0", true}, {"8760h", true}, {"8760h1ms", false}}},
      {"shutdown_grace", {{"0", true}, {"1h", true}, {"1h1ms", false}}},
      {"max_schedule_ahead",
       {{"0", false},
        {"999ms", false},
        {"1s", true},
        {"876600h", true},
        {"876600h1ms", false}}},
      {"max_topic_bytes",
       {{"0", false}, {"1", true}, {"4096", true}, {"4097", false}}},
      {"max_id_bytes", {{"0", true}, {"4096", true}, {"4097", false}}},
      {"max_payload_bytes",
       {{"0", true}, {"16777216", true}, {"16777217", false}}},
      {"max_batch",
       {{"0", false}, {"1", true}, {"100000", true}, {"100001", false}}},
      {"max_in_flight",
       {{"0", false}, {"1", true}, {"1000000", true}, {"1000001", false}}},
      {"max_page_size",
       {{"0", false}, {"1", true}, {"100000", true}, {"100001", false}}},
  };
  for (FlagCases& f : all) {
    const bool size =
        absl::StartsWith(f.flag, "max_") && f.flag != "max_schedule_ahead";
    for (const Case& c : size ? SizeExtremes() : DurationExtremes()) {
      f.cases.push_back(c);
    }
  }
  return all;
}

TEST(ConfigTest, EveryDurationAndSizeFlagHasAFiniteCheckedRange) {
  for (const FlagCases& f : AllCases()) {
    for (const Case& c : f.cases) {
      SCOPED_TRACE(absl::StrCat("--", f.flag, "=", c.value));
      absl::FlagSaver saver;
      absl::StatusOr<Config> config =
          ConfigFromSettings({absl::StrCat("--", f.flag, "=", c.value)});
      if (c.accepted) {
        EXPECT_TRUE(config.ok()) << config.status();
        continue;
      }
      ASSERT_FALSE(config.ok());
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(config.status().message()),
                  ::testing::StartsWith(absl::StrCat("--", f.flag, ": ")));
    }
  }
}

TEST(ConfigTest, ValuesInRangeAreTakenAsGiven) {
  absl::FlagSaver saver;
  ASSERT_OK_AND_ASSIGN(
      Config config,
      ConfigFromSettings({"--memory_horizon=8760h", "--retention=1s",
                          "--shutdown_grace=0", "--max_schedule_ahead=1s",
                          "--max_payload_bytes=16777216", "--max_batch=1"}));
  EXPECT_EQ(config.memory_horizon, absl::Hours(8760));
  EXPECT_EQ(config.retention, absl::Seconds(1));
  EXPECT_EQ(config.shutdown_grace, absl::ZeroDuration());
  EXPECT_EQ(config.limits.max_schedule_ahead, absl::Seconds(1));
  EXPECT_EQ(config.limits.max_payload_bytes, 16777216u);
  EXPECT_EQ(config.limits.max_batch, 1u);
}

TEST(ConfigTest, OutOfRangeErrorNamesTheRange) {
  absl::FlagSaver saver;
  EXPECT_THAT(
      std::string(
          ConfigFromSettings({"--memory_horizon=inf"}).status().message()),
      ::testing::HasSubstr("--memory_horizon: must be 0 (off) or between 1s "
                           "and 8760h, got inf"));
}

TEST(ConfigTest, MetricsListenIsTheFormerNameOfHttpListen) {
  absl::FlagSaver saver;
  ASSERT_OK_AND_ASSIGN(Config config, ConfigFromSettings({}));
  EXPECT_EQ(config.http_listen, "127.0.0.1:9400");
  ASSERT_OK_AND_ASSIGN(config,
                       ConfigFromSettings({"--metrics_listen=127.0.0.1:1"}));
  EXPECT_EQ(config.http_listen, "127.0.0.1:1");
  ASSERT_OK_AND_ASSIGN(config,
                       ConfigFromSettings({"--http_listen=127.0.0.1:2",
                                           "--metrics_listen=127.0.0.1:2"}));
  EXPECT_EQ(config.http_listen, "127.0.0.1:2");
  EXPECT_THAT(std::string(ConfigFromSettings({"--http_listen=127.0.0.1:3",
                                              "--metrics_listen=127.0.0.1:4"})
                              .status()
                              .message()),
              ::testing::HasSubstr("--metrics-listen=127.0.0.1:4 is the "
                                   "former name of --http-listen=127.0.0.1:3"));
}

TEST(ConfigTest, LoopbackAddresses) {
  for (const char* address :
       {"127.0.0.1:7400", "127.1.2.3:0", "localhost:7400", "[::1]:7400",
        "unix:/run/delayd.sock", "unix-abstract:delayd"}) {
    EXPECT_TRUE(IsLoopback(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:7400", "[::]:7400", ":7400", "10.0.0.5:7400", "128.0.0.1:7400",
        "127.0.0.1.example.com:7400", "127.0.0:7400", "127.0.0.x:7400",
        "[::1:7400", "delayd.internal:7400", "[::2]:7400"}) {
    EXPECT_FALSE(IsLoopback(address)) << address;
  }
}

TEST(ConfigTest, NonLoopbackNeedsTlsAndAuthOrInsecure) {
  // Each parse from the defaults: ConfigFromSettings sets the flags.
  auto parse = [](std::vector<std::string> settings) {
    absl::FlagSaver saver;
    return ConfigFromSettings(settings);
  };
  auto refusal = [&](std::vector<std::string> settings) {
    return std::string(parse(settings).status().message());
  };
  EXPECT_THAT(refusal({"--listen=0.0.0.0:7400"}),
              ::testing::HasSubstr("missing --tls-cert and --tls-key and "
                                   "--auth-file (or pass --insecure"));
  EXPECT_THAT(refusal({"--listen=0.0.0.0:7400", "--tls_cert=c", "--tls_key=k"}),
              ::testing::HasSubstr("missing --auth-file"));
  EXPECT_THAT(refusal({"--listen=0.0.0.0:7400", "--auth_file=a"}),
              ::testing::HasSubstr("missing --tls-cert and --tls-key ("));
  EXPECT_THAT(refusal({"--http_listen=0.0.0.0:9400"}),
              ::testing::HasSubstr("--http-listen=0.0.0.0:9400 is not a "
                                   "loopback address"));
  EXPECT_THAT(refusal({"--tls_cert=c"}),
              ::testing::HasSubstr("--tls-cert and --tls-key go together"));
  EXPECT_THAT(refusal({"--tls_client_ca=ca"}),
              ::testing::HasSubstr("--tls-client-ca needs --tls-cert"));

  ASSERT_OK_AND_ASSIGN(
      Config secured,
      parse({"--listen=0.0.0.0:7400", "--tls_cert=c", "--tls_key=k",
             "--tls_client_ca=ca", "--auth_file=a"}));
  EXPECT_EQ(secured.tls.cert_file, "c");
  EXPECT_EQ(secured.tls.key_file, "k");
  EXPECT_EQ(secured.tls.client_ca_file, "ca");
  EXPECT_EQ(secured.auth_file, "a");
  EXPECT_FALSE(secured.insecure);
  ASSERT_OK_AND_ASSIGN(
      Config open, parse({"--listen=0.0.0.0:7400", "--http_listen=[::]:9400",
                          "--insecure"}));
  EXPECT_TRUE(open.insecure);
  EXPECT_FALSE(open.tls.enabled());
}

}  // namespace
}  // namespace delayd::server
