// Unit tests of delayctl's text helpers and of Run() in-process for what
// needs no server: parsing, help and usage errors.
#include "client/delayctl/format.h"

#include <sstream>

#include "absl/time/civil_time.h"
#include "client/delayctl/args.h"
#include "client/delayctl/delayctl.h"
#include "client/delayctl/job_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::delayctl {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AcceptsGoStyleDurationsAndDays) {
  EXPECT_EQ(*ParseDuration("30m", "x"), absl::Minutes(30));
  EXPECT_EQ(*ParseDuration("1h30m", "x"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("250ms", "x"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration("2d", "x"), absl::Hours(48));
  EXPECT_EQ(*ParseDuration("2d12h", "x"), absl::Hours(60));
  EXPECT_EQ(*ParseDuration("0", "x"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration("now", "x"), absl::ZeroDuration());
}

TEST(ParseDurationTest, RefusesNegativeAndGarbageNamingTheArgument) {
  absl::StatusOr<absl::Duration> d = ParseDuration("-5m", "--lease");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--lease"));
  EXPECT_FALSE(ParseDuration("soon", "x").ok());
  EXPECT_FALSE(ParseDuration("5", "x").ok());
  EXPECT_FALSE(ParseDuration("", "x").ok());
}

TEST(ParseWhenTest, DelayOrRfc3339) {
  absl::StatusOr<When> delay = ParseWhen("1h", "WHEN");
  ASSERT_TRUE(delay.ok());
  EXPECT_FALSE(delay->absolute);
  EXPECT_EQ(delay->delay, absl::Hours(1));

  absl::StatusOr<When> at = ParseWhen("2026-11-22T07:30:00+01:00", "WHEN");
  ASSERT_TRUE(at.ok());
  EXPECT_TRUE(at->absolute);
  EXPECT_EQ(at->at, absl::FromCivil(absl::CivilSecond(2026, 11, 22, 6, 30, 0),
                                    absl::UTCTimeZone()));
  EXPECT_FALSE(ParseWhen("2026-11-22", "WHEN").ok());
  EXPECT_FALSE(ParseWhen("tomorrow", "WHEN").ok());
}

TEST(ToProtoSaturatedTest, FarOffValuesGoAsTheInt64NanosecondBound) {
  google::protobuf::Duration d = ToProtoSaturated(absl::Milliseconds(1500));
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500'000'000);
  google::protobuf::Timestamp t = ToProtoSaturated(absl::FromUnixMillis(-1500));
  EXPECT_EQ(t.seconds(), -2);
  EXPECT_EQ(t.nanos(), 500'000'000);

  d = ToProtoSaturated(*ParseDuration("inf", "x"));
  EXPECT_EQ(d.seconds(), 9'223'372'036);
  EXPECT_EQ(d.nanos(), 854'775'807);
  for (const char* far : {"3000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) {
    t = ToProtoSaturated(ParseWhen(far, "WHEN")->at);
    EXPECT_EQ(t.seconds(), 9'223'372'036) << far;
    EXPECT_EQ(t.nanos(), 854'775'807) << far;
  }
  t = ToProtoSaturated(ParseWhen("0001-01-01T00:00:00Z", "WHEN")->at);
  EXPECT_EQ(t.seconds(), -9'223'372'037);
  EXPECT_EQ(t.nanos(), 145'224'192);
}

TEST(HumanTextTest, DurationsShowTheTwoLargestUnits) {
  EXPECT_EQ(HumanDuration(absl::Milliseconds(3)), "3ms");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(2500)), "2.5s");
  EXPECT_EQ(HumanDuration(absl::Seconds(1798)), "29m58s");
  EXPECT_EQ(HumanDuration(absl::Minutes(90)), "1h30m");
  EXPECT_EQ(HumanDuration(absl::Hours(50) + absl::Seconds(7)), "2d2h");
  EXPECT_EQ(HumanDuration(absl::Hours(3) + absl::Seconds(5)), "3h");
  EXPECT_EQ(HumanDuration(-absl::Seconds(12)), "12s");
}

TEST(HumanTextTest, RelativeAndAbsoluteTimes) {
  const absl::Time now = absl::FromCivil(
      absl::CivilSecond(2026, 11, 22, 6, 0, 2), absl::UTCTimeZone());
  EXPECT_EQ(RelativeTime(now + absl::Seconds(1798), now),
            "in 29m58s (2026-11-22 06:30:00Z)");
  EXPECT_EQ(RelativeTime(now - absl::Seconds(3), now),
            "3s ago (2026-11-22 05:59:59Z)");
  EXPECT_EQ(RelativeTime(now + absl::Milliseconds(250), now, true),
            "in 250ms (2026-11-22 06:00:02.250Z)");
}

TEST(HumanTextTest, PayloadPreview) {
  EXPECT_EQ(PayloadPreview("", 10), "(empty)");
  EXPECT_EQ(PayloadPreview("{\"a\":1}", 40), "\"{\\\"a\\\":1}\"");
  EXPECT_EQ(PayloadPreview("h\xc3\xa9llo", 40), "\"h\xc3\xa9llo\"");
  EXPECT_EQ(PayloadPreview(std::string("\x00\xff", 2), 40), "hex:00ff");
  EXPECT_EQ(PayloadPreview(std::string(100, 'x'), 12),
            "\"xxxxxxxxxxx... (100 bytes)");
}

TEST(HumanTextTest, TableAlignsColumns) {
  EXPECT_EQ(Table({{"ID", "STATE", "X"}, {"order-1", "READY", ""}}),
            "ID       STATE  X\n"
            "order-1  READY\n");
}

TEST(JobTextTest, ParseStateTakesShortAndFullNames) {
  EXPECT_EQ(*ParseState("in-flight"), v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(*ParseState("DEAD"), v1::JOB_STATE_DEAD);
  EXPECT_EQ(*ParseState("JOB_STATE_READY"), v1::JOB_STATE_READY);
  EXPECT_EQ(*ParseState("paused"), v1::JOB_STATE_PAUSED);
  EXPECT_FALSE(ParseState("unspecified").ok());
  EXPECT_FALSE(ParseState("gone").ok());
}

TEST(ArgsTest, FlagsTakeValuesEitherWayAndRepeat) {
  CommandSpec spec{
      "x",
      "A B",
      "",
      "",
      {{"id", "ID", ""}, {"label", "KV", "", true}, {"ack", "", ""}},
      1,
      2};
  absl::StatusOr<Args> a =
      Parse(spec, {},
            {"--id=1", "a", "--label", "k=v", "--label=x=y", "--ack", "--",
             "--not-a-flag"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("id", ""), "1");
  EXPECT_EQ(a->All("label"), (std::vector<std::string>{"k=v", "x=y"}));
  EXPECT_TRUE(a->Has("ack"));
  EXPECT_EQ(a->positional(), (std::vector<std::string>{"a", "--not-a-flag"}));
  EXPECT_FALSE(Parse(spec, {}, {"a", "--ack=yes"}).ok());
  EXPECT_FALSE(Parse(spec, {}, {"a", "--id"}).ok());
  EXPECT_FALSE(Parse(spec, {}, {"a", "b", "c"}).ok());
  EXPECT_FALSE(Parse(spec, {}, {}).ok());
}

int RunInProcess(const std::vector<std::string>& args, std::string* out,
                 std::string* err) {
  std::istringstream in;
  std::ostringstream o, e;
  const int code = Run(args, Io{&in, &o, &e});
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(RunTest, UsageErrorsAreOneLineWithExitTwo) {
  std::string out, err;
  EXPECT_EQ(RunInProcess({"get", "t"}, &out, &err), kExitUsage);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err,
            "delayctl: get: expected TOPIC ID, got 1 argument (see delayctl "
            "get --help)\n");
  EXPECT_EQ(
      RunInProcess({"schedule", "t", "1h", "--max-attempts", "-1"}, &out, &err),
      kExitUsage);
  EXPECT_EQ(err,
            "delayctl: --max-attempts: '-1' is not a non-negative integer\n");
  EXPECT_EQ(RunInProcess({"--timeout=0s", "stats"}, &out, &err), kExitUsage);
  EXPECT_EQ(err, "delayctl: --timeout: must be more than 0\n");
}

TEST(RunTest, StopsOnSignalOnlyForSubscribe) {
  EXPECT_TRUE(StopsOnSignal({"subscribe", "t"}));
  EXPECT_TRUE(StopsOnSignal({"--server", "h:1", "--json", "subscribe", "t"}));
  EXPECT_FALSE(StopsOnSignal({"get", "subscribe", "x"}));
  EXPECT_FALSE(StopsOnSignal({"--server", "subscribe", "stats"}));
  EXPECT_FALSE(StopsOnSignal({}));
}

}  // namespace
}  // namespace delayd::delayctl
