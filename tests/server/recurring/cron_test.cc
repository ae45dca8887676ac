// CronExpression and NextCronFiring: the seed examples of issue 14, each
// dialect's syntax, the DST rules in real zones (expected instants worked
// out with Python's zoneinfo), parse errors, and NextCivil against a
// brute-force scan of Matches.
#include "server/recurring/cron.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::recurring {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::TimeZone Zone(const std::string& name) {
  absl::TimeZone zone;
  EXPECT_TRUE(absl::LoadTimeZone(name, &zone)) << name;
  return zone;
}

absl::Time Utc(const std::string& rfc3339) {
  absl::Time t;
  std::string error;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error))
      << rfc3339 << ": " << error;
  return t;
}

CronExpression MustParse(const std::string& text,
                         CronDialect dialect = CronDialect::kQuartz) {
  absl::StatusOr<CronExpression> e =
      CronExpression::Parse("expression", text, dialect);
  EXPECT_OK(e);
  return *std::move(e);
}

// The first `n` firings after `after`, as UTC RFC 3339 strings.
std::vector<std::string> Firings(const std::string& text,
                                 const std::string& zone,
                                 const std::string& after, int n,
                                 CronDialect dialect = CronDialect::kQuartz) {
  const CronExpression e = MustParse(text, dialect);
  const absl::TimeZone tz = Zone(zone);
  std::vector<std::string> out;
  absl::Time t = Utc(after);
  for (int i = 0; i < n; ++i) {
    const std::optional<absl::Time> next = NextCronFiring(e, tz, t);
    if (!next.has_value()) break;
    out.push_back(
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", *next, absl::UTCTimeZone()));
    t = *next;
  }
  return out;
}

// ---- The seed examples of issue 14 (UTC, from Thursday 2026-01-01). ----

TEST(CronTest, EveryFiveSeconds) {
  EXPECT_THAT(Firings("*/5 * * * * ?", "UTC", "2026-01-01T00:00:00Z", 3),
              ElementsAreArray({"2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z",
                                "2026-01-01T00:00:15Z"}));
}

TEST(CronTest, LastDayOfTheMonthAt23) {
  EXPECT_THAT(
      Firings("0 0 23 L * ?", "UTC", "2026-01-01T00:00:00Z", 4),
      ElementsAreArray({"2026-01-31T23:00:00Z", "2026-02-28T23:00:00Z",
                        "2026-03-31T23:00:00Z", "2026-04-30T23:00:00Z"}));
}

TEST(CronTest, LastDayOfTheWeekIsSaturday) {
  EXPECT_THAT(Firings("0 0 1 ? * L", "UTC", "2026-01-01T00:00:00Z", 3),
              ElementsAreArray({"2026-01-03T01:00:00Z", "2026-01-10T01:00:00Z",
                                "2026-01-17T01:00:00Z"}));
}

TEST(CronTest, ListOfMinutes) {
  EXPECT_THAT(
      Firings("0 26,29,33 * * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
      ElementsAreArray({"2026-01-01T00:26:00Z", "2026-01-01T00:29:00Z",
                        "2026-01-01T00:33:00Z", "2026-01-01T01:26:00Z"}));
}

TEST(CronTest, ListOfHours) {
  EXPECT_THAT(
      Firings("0 0 0,13,18,21 * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
      ElementsAreArray({"2026-01-01T13:00:00Z", "2026-01-01T18:00:00Z",
                        "2026-01-01T21:00:00Z", "2026-01-02T00:00:00Z"}));
}

TEST(CronTest, ThirdFriday) {
  EXPECT_THAT(Firings("0 15 10 ? * 6#3", "UTC", "2026-01-01T00:00:00Z", 3),
              ElementsAreArray({"2026-01-16T10:15:00Z", "2026-02-20T10:15:00Z",
                                "2026-03-20T10:15:00Z"}));
}

// ---- Quartz syntax. ----

TEST(CronTest, NearestWeekdayStaysInTheMonth) {
  // 2026-08-01 is a Saturday: 1W is Monday the 3rd. 2026-05-31 is a
  // Sunday: 31W is Friday the 29th. 2026-02-28 is a Saturday: LW is the
  // 27th.
  EXPECT_THAT(Firings("0 0 0 1W 8 ?", "UTC", "2026-01-01T00:00:00Z", 1),
              ElementsAreArray({"2026-08-03T00:00:00Z"}));
  EXPECT_THAT(Firings("0 0 0 31W 5 ?", "UTC", "2026-01-01T00:00:00Z", 1),
              ElementsAreArray({"2026-05-29T00:00:00Z"}));
  EXPECT_THAT(Firings("0 0 0 LW 2 ?", "UTC", "2026-01-01T00:00:00Z", 1),
              ElementsAreArray({"2026-02-27T00:00:00Z"}));
  EXPECT_THAT(Firings("0 0 0 L-3 2 ?", "UTC", "2026-01-01T00:00:00Z", 1),
              ElementsAreArray({"2026-02-25T00:00:00Z"}));
}

TEST(CronTest, LastWeekdayOfTheMonthAndNames) {
  // Quartz 5L: the last Thursday.
  EXPECT_THAT(
      Firings("0 0 0 ? * 5L", "UTC", "2026-01-01T00:00:00Z", 2),
      ElementsAreArray({"2026-01-29T00:00:00Z", "2026-02-26T00:00:00Z"}));
  EXPECT_THAT(
      Firings("0 0 12 ? jan,Mar MON-wed", "UTC", "2026-01-01T00:00:00Z", 4),
      ElementsAreArray({"2026-01-05T12:00:00Z", "2026-01-06T12:00:00Z",
                        "2026-01-07T12:00:00Z", "2026-01-12T12:00:00Z"}));
}

TEST(CronTest, StepsRangesAndWrappingRanges) {
  EXPECT_THAT(Firings("10/20 0 0 * * ?", "UTC", "2026-01-01T00:00:00Z", 3),
              ElementsAreArray({"2026-01-01T00:00:10Z", "2026-01-01T00:00:30Z",
                                "2026-01-01T00:00:50Z"}));
  EXPECT_THAT(Firings("0 0 22-2/2 * * ?", "UTC", "2026-01-01T00:00:00Z", 3),
              ElementsAreArray({"2026-01-01T02:00:00Z", "2026-01-01T22:00:00Z",
                                "2026-01-02T00:00:00Z"}));
}

TEST(CronTest, YearFieldBoundsTheSchedule) {
  EXPECT_THAT(
      Firings("0 0 0 1 1 ? 2030,2032", "UTC", "2026-01-01T00:00:00Z", 5),
      ElementsAreArray({"2030-01-01T00:00:00Z", "2032-01-01T00:00:00Z"}));
  // Never: 30 February.
  EXPECT_THAT(Firings("0 0 0 30 2 ?", "UTC", "2026-01-01T00:00:00Z", 1),
              ::testing::IsEmpty());
  // Nothing after 2099, local time.
  EXPECT_THAT(Firings("0 0 0 1 1 ?", "UTC", "2099-01-01T00:00:00Z", 1),
              ::testing::IsEmpty());
  // Before 1970, the first occurrence is in 1970.
  EXPECT_THAT(Firings("0 0 0 1 1 ?", "UTC", "1969-06-01T00:00:00Z", 1),
              ElementsAreArray({"1970-01-01T00:00:00Z"}));
}

// ---- Unix syntax. ----

TEST(CronTest, UnixFiveAndSixFieldsAndMacros) {
  EXPECT_THAT(Firings("*/15 9-10 * * 1-5", "UTC", "2026-01-02T10:40:00Z", 3,
                      CronDialect::kUnix),
              ElementsAreArray({"2026-01-02T10:45:00Z", "2026-01-05T09:00:00Z",
                                "2026-01-05T09:15:00Z"}));
  EXPECT_THAT(
      Firings("30 */20 * * * *", "UTC", "2026-01-01T00:00:00Z", 2,
              CronDialect::kUnix),
      ElementsAreArray({"2026-01-01T00:00:30Z", "2026-01-01T00:20:30Z"}));
  EXPECT_THAT(
      Firings("@weekly", "UTC", "2026-01-01T00:00:00Z", 2, CronDialect::kUnix),
      ElementsAreArray({"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}));
  EXPECT_THAT(
      Firings("@YEARLY", "UTC", "2026-01-01T00:00:00Z", 1, CronDialect::kUnix),
      ElementsAreArray({"2027-01-01T00:00:00Z"}));
  EXPECT_THAT(
      Firings("@hourly", "UTC", "2026-01-01T00:00:00Z", 1, CronDialect::kUnix),
      ElementsAreArray({"2026-01-01T01:00:00Z"}));
}

TEST(CronTest, UnixSevenIsSundayAndDayFieldsCombineLikeVixieCron) {
  EXPECT_EQ(Firings("0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", 3,
                    CronDialect::kUnix),
            Firings("0 0 * * 0", "UTC", "2026-01-01T00:00:00Z", 3,
                    CronDialect::kUnix));
  EXPECT_EQ(Firings("0 0 * * 5-7", "UTC", "2026-01-01T00:00:00Z", 6,
                    CronDialect::kUnix),
            Firings("0 0 * * FRI,SAT,SUN", "UTC", "2026-01-01T00:00:00Z", 6,
                    CronDialect::kUnix));
  // Both restricted: the 13th or any Monday.
  EXPECT_THAT(Firings("0 12 13 * MON", "UTC", "2026-01-01T00:00:00Z", 3,
                      CronDialect::kUnix),
              ElementsAreArray({"2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z",
                                "2026-01-13T12:00:00Z"}));
  // A day field starting with '*' does not restrict (also `*/2`).
  EXPECT_THAT(
      Firings("0 12 */2 * MON", "UTC", "2026-01-01T00:00:00Z", 2,
              CronDialect::kUnix),
      ElementsAreArray({"2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z"}));
  // Unix 5L: the last Friday; 5#1 the first.
  EXPECT_THAT(Firings("0 0 * * 5L", "UTC", "2026-01-01T00:00:00Z", 1,
                      CronDialect::kUnix),
              ElementsAreArray({"2026-01-30T00:00:00Z"}));
  EXPECT_THAT(Firings("0 0 * * 5#1", "UTC", "2026-01-03T00:00:00Z", 1,
                      CronDialect::kUnix),
              ElementsAreArray({"2026-02-06T00:00:00Z"}));
}

// ---- DST (expected instants from Python's zoneinfo). ----

TEST(CronTest, SpringForwardGapFiresOnceAtTheEndOfTheGap) {
  // New York, 2026-03-08: 02:00 EST -> 03:00 EDT (07:00Z).
  EXPECT_THAT(
      Firings("0 30 2 * * ?", "America/New_York", "2026-03-07T00:00:00Z", 3),
      ElementsAreArray({"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z",
                        "2026-03-09T06:30:00Z"}));
  // Every matching time of the gap fires as one firing, not a burst.
  EXPECT_THAT(
      Firings("0 */15 2 * * ?", "America/New_York", "2026-03-08T00:00:00Z", 2),
      ElementsAreArray({"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}));
  // 03:00 itself is the end of the gap: the same firing.
  EXPECT_THAT(
      Firings("0 0,30 * * * ?", "America/New_York", "2026-03-08T06:15:00Z", 3),
      ElementsAreArray({"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z",
                        "2026-03-08T07:30:00Z"}));
  // Lord Howe's 30-minute shift, 2026-10-04 02:00 -> 02:30 (+11).
  EXPECT_THAT(
      Firings("0 15 2 * * ?", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 2),
      ElementsAreArray({"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}));
}

TEST(CronTest, FallBackRepeatFiresOnceAtTheFirstOccurrence) {
  // New York, 2026-11-01: 02:00 EDT -> 01:00 EST; 01:30 occurs at 05:30Z
  // and 06:30Z.
  EXPECT_THAT(
      Firings("0 30 1 * * ?", "America/New_York", "2026-10-31T00:00:00Z", 3),
      ElementsAreArray({"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z",
                        "2026-11-02T06:30:00Z"}));
  // Every 20 minutes through the repeated hour: each local time once.
  EXPECT_THAT(
      Firings("0 */20 1 * * ?", "America/New_York", "2026-11-01T05:00:00Z", 4),
      ElementsAreArray({"2026-11-01T05:20:00Z", "2026-11-01T05:40:00Z",
                        "2026-11-02T06:00:00Z", "2026-11-02T06:20:00Z"}));
  // Lord Howe, 2026-04-05 02:00 (+11) -> 01:30 (+10:30): 01:45 at 14:45Z
  // and 15:15Z.
  EXPECT_THAT(
      Firings("0 45 1 * * ?", "Australia/Lord_Howe", "2026-04-04T12:00:00Z", 2),
      ElementsAreArray({"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}));
}

TEST(CronTest, ASkippedDayFiresOnceAtItsEnd) {
  // Apia skipped 2011-12-30: 12-29 23:59:59 (-10) -> 12-31 00:00 (+14).
  EXPECT_THAT(
      Firings("0 0 12 * * ?", "Pacific/Apia", "2011-12-29T00:00:00Z", 3),
      ElementsAreArray({"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z",
                        "2011-12-30T22:00:00Z"}));
}

TEST(CronTest, NegativeDstIsJustAnOffset) {
  // Dublin: IST (+1) in summer, GMT in winter (negative DST in tzdata).
  EXPECT_THAT(
      Firings("0 0 12 15 1,7 ?", "Europe/Dublin", "2026-01-01T00:00:00Z", 2),
      ElementsAreArray({"2026-01-15T12:00:00Z", "2026-07-15T11:00:00Z"}));
}

// ---- Errors. ----

void ExpectParseError(const std::string& text, CronDialect dialect,
                      const std::string& part) {
  absl::StatusOr<CronExpression> e =
      CronExpression::Parse("job.cron.expression", text, dialect);
  ASSERT_FALSE(e.ok()) << text;
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()),
              StartsWith("job.cron.expression: "));
  EXPECT_THAT(std::string(e.status().message()), HasSubstr(part)) << text;
}

TEST(CronTest, BadExpressionsNameThePositionTheFieldAndWhatWasExpected) {
  const auto q = CronDialect::kQuartz;
  const auto u = CronDialect::kUnix;
  ExpectParseError("0 0 25 * * ?", q,
                   "at position 5 (hour field \"25\"): expected a value 0-23");
  ExpectParseError("0 0 12 * * MON", q,
                   "at position 12 (day-of-week field \"MON\"): expected '?' "
                   "in day-of-month or day-of-week");
  ExpectParseError("0 0 12 ? * ?", q, "'?' in both");
  ExpectParseError("0 0 12 * *", q, "expected 6 or 7 fields");
  ExpectParseError("0 0 12 ? * 6#6", q, "an occurrence 1-5 after '#'");
  ExpectParseError("0 0 12 ? FOO *", q,
                   "(month field \"FOO\"): expected a value 1-12 or JAN-DEC");
  ExpectParseError("*/0 * * ? * *", q, "expected a step 1-60");
  ExpectParseError("0 0 0 1 1 ? 2100", q, "expected a value 1970-2099");
  ExpectParseError("0 0 0 L-31 * ?", q, "a number of days 0-30");
  ExpectParseError("0 0 0 32W * ?", q, "a day 1-31 before 'W'");
  ExpectParseError("0 0 1,,2 * * ?", q, "at position 7");
  ExpectParseError("  0 0 1-x * * ?", q, "at position 9 (hour field");
  ExpectParseError("0 12 ? * MON", u, "'?' is Quartz only");
  ExpectParseError("0 24 * * *", u, "at position 3 (hour field");
  ExpectParseError("0 0 * * 8", u, "expected a value 0-7 or SUN-SAT");
  ExpectParseError("@reboot", u, "expected one of @yearly");
  ExpectParseError("* * * *", u, "got 4");
}

// Random bytes and random mutations of valid expressions: Parse answers OK
// or INVALID_ARGUMENT naming the field, never anything else (and, under the
// sanitizers, touches nothing it should not); what parses finds its next
// occurrence.
TEST(CronTest, MalformedInputIsRefusedCleanly) {
  const std::vector<std::string> seeds = {
      "*/5 * * * * ?",   "0 0 23 L * ?",      "0 0 1 ? * L",
      "0 15 10 ? * 6#3", "0 0 0 LW * ?",      "0 0 0 L-3 * ?",
      "0 0 12 15W * ?",  "10/20 0 0 * * ?",   "0 0 22-2/2 * * ? 2030-2040",
      "@weekly",         "*/15 9-17 * * 1-5", "0 12 13 * MON",
      "0 0 * * 5L",      "0 0 * * FRI#2"};
  const std::string alphabet = "0123456789*?/-,#LW @JANSUMOTHFRI\t";
  std::mt19937_64 rng(7);
  const absl::CivilSecond start(2026, 1, 1, 0, 0, 0);
  int parsed = 0;
  for (int i = 0; i < 100000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:  // insert
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:  // delete
          if (at < text.size()) text.erase(at, 1);
          break;
        default:  // a random byte
          if (at < text.size()) text[at] = static_cast<char>(rng() % 256);
      }
    }
    for (const CronDialect dialect :
         {CronDialect::kQuartz, CronDialect::kUnix}) {
      absl::StatusOr<CronExpression> e =
          CronExpression::Parse("expression", text, dialect);
      if (!e.ok()) {
        ASSERT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument)
            << absl::CEscape(text);
        ASSERT_THAT(std::string(e.status().message()),
                    StartsWith("expression: "))
            << absl::CEscape(text);
        continue;
      }
      ++parsed;
      const std::optional<absl::CivilSecond> next = e->NextCivil(start);
      if (next.has_value()) {
        ASSERT_TRUE(e->Matches(*next)) << absl::CEscape(text);
      }
    }
  }
  // Some mutations stay valid, so what parses is searched too.
  EXPECT_GT(parsed, 2000);
}

// ---- NextCivil against a brute-force scan of Matches. ----

TEST(CronTest, NextCivilIsTheFirstMatchOfABruteForceScan) {
  const std::vector<std::pair<std::string, CronDialect>> expressions = {
      {"*/7 * * * * ?", CronDialect::kQuartz},
      {"0 */13 1-3 ? * MON-FRI", CronDialect::kQuartz},
      {"59 59 23 L * ?", CronDialect::kQuartz},
      {"0 0 0 LW * ?", CronDialect::kQuartz},
      {"0 30 9 15W * ?", CronDialect::kQuartz},
      {"0 0 8 ? * 2#2", CronDialect::kQuartz},
      {"0 0 8 ? * 1L", CronDialect::kQuartz},
      {"5 4 * * SUN", CronDialect::kUnix},
      {"0 0 1,15 * 3", CronDialect::kUnix},
      {"*/20 23 * * 6-1", CronDialect::kUnix},
  };
  std::mt19937_64 rng(20261124);
  for (const auto& [text, dialect] : expressions) {
    SCOPED_TRACE(text);
    const CronExpression e = MustParse(text, dialect);
    for (int i = 0; i < 20; ++i) {
      const absl::CivilSecond start =
          absl::CivilSecond(2024, 1, 1, 0, 0, 0) +
          static_cast<int64_t>(rng() % (3 * 365 * 86400));
      const std::optional<absl::CivilSecond> next = e.NextCivil(start);
      ASSERT_TRUE(next.has_value());
      ASSERT_TRUE(e.Matches(*next));
      ASSERT_GT(*next, start);
      // Nothing matches in between (scanned second by second, when at most
      // two days).
      if (*next - start <= 2 * 86400) {
        for (absl::CivilSecond c = start + 1; c < *next; ++c) {
          ASSERT_FALSE(e.Matches(c)) << absl::FormatCivilTime(c);
        }
      }
    }
  }
}

}  // namespace
}  // namespace delayd::server::recurring
