// Recurrence: validation of delayd.v1.Recurrence (each refusal names its
// field), intervals, start_at and end_at, and how occurrences are shown.
#include "server/recurring/recurrence.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::recurring {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

google::protobuf::Timestamp Ts(int64_t ms) {
  google::protobuf::Timestamp t;
  t.set_seconds(ms / 1000);
  t.set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
  return t;
}

google::protobuf::Duration Dur(int64_t ms) {
  google::protobuf::Duration d;
  d.set_seconds(ms / 1000);
  d.set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
  return d;
}

v1::Recurrence Every(int64_t interval_ms) {
  v1::Recurrence r;
  *r.mutable_every()->mutable_interval() = Dur(interval_ms);
  return r;
}

v1::Recurrence Cron(const std::string& expression, const std::string& zone,
                    v1::CronDialect dialect = v1::CRON_DIALECT_QUARTZ) {
  v1::Recurrence r;
  r.mutable_cron()->set_expression(expression);
  r.mutable_cron()->set_time_zone(zone);
  r.mutable_cron()->set_dialect(dialect);
  return r;
}

std::vector<int64_t> Next(const Recurrence& r, int64_t after, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    const std::optional<int64_t> next = r.NextAfter(after);
    if (!next.has_value()) break;
    out.push_back(*next);
    after = *next;
  }
  return out;
}

TEST(RecurrenceTest, AnIntervalCountsFromItsAnchorInAbsoluteTime) {
  v1::Recurrence p = Every(1500);
  *p.mutable_every()->mutable_anchor() = Ts(kNow + 250);
  ASSERT_OK_AND_ASSIGN(Recurrence r, Recurrence::FromProto("r", p, kNow));
  EXPECT_THAT(Next(r, kNow, 3),
              ElementsAre(kNow + 250, kNow + 1750, kNow + 3250));
  // From within: strictly after.
  EXPECT_THAT(Next(r, kNow + 1750, 1), ElementsAre(kNow + 3250));
  // Unset anchor: the time of the call (start_at unset too).
  ASSERT_OK_AND_ASSIGN(Recurrence now,
                       Recurrence::FromProto("r", Every(60'000), kNow));
  EXPECT_THAT(Next(now, kNow - 1, 2), ElementsAre(kNow, kNow + 60'000));
}

TEST(RecurrenceTest, StartAndEndBoundTheOccurrences) {
  v1::Recurrence p = Every(1000);
  *p.mutable_every()->mutable_anchor() = Ts(kNow);
  *p.mutable_start_at() = Ts(kNow + 2500);
  *p.mutable_end_at() = Ts(kNow + 5000);
  ASSERT_OK_AND_ASSIGN(Recurrence r, Recurrence::FromProto("r", p, kNow));
  EXPECT_THAT(Next(r, kNow, 10),
              ElementsAre(kNow + 3000, kNow + 4000, kNow + 5000));
  // A cron schedule too.
  v1::Recurrence c = Cron("0 0 * * * ?", "UTC");
  *c.mutable_start_at() = Ts(kNow + 1);
  *c.mutable_end_at() = Ts(kNow + 3 * 3'600'000);
  ASSERT_OK_AND_ASSIGN(Recurrence cr, Recurrence::FromProto("r", c, kNow));
  EXPECT_THAT(Next(cr, 0, 10), ElementsAre(kNow + 3'600'000, kNow + 7'200'000,
                                           kNow + 10'800'000));
}

TEST(RecurrenceTest, OccurrencesShowTheirLocalTimeAndOffset) {
  // New York's spring-forward gap: 02:30 fires at 03:00 EDT.
  ASSERT_OK_AND_ASSIGN(
      Recurrence r, Recurrence::FromProto(
                        "r", Cron("0 30 2 * * ?", "America/New_York"), kNow));
  const int64_t gap_end = 1'772'953'200'000;  // 2026-03-08T07:00:00Z
  const std::optional<int64_t> next = r.NextAfter(gap_end - 3'600'000);
  ASSERT_EQ(next, gap_end);
  const v1::Occurrence o = PresentOccurrence(*next, r.zone());
  EXPECT_EQ(o.at().seconds(), gap_end / 1000);
  EXPECT_EQ(o.local_time(), "2026-03-08T03:00:00-04:00");
  EXPECT_EQ(o.utc_offset_seconds(), -4 * 3600);
  // Milliseconds and times before 1970 (UTC for an interval).
  const v1::Occurrence early = PresentOccurrence(-1500, absl::UTCTimeZone());
  EXPECT_EQ(early.at().seconds(), -2);
  EXPECT_EQ(early.at().nanos(), 500'000'000);
  EXPECT_EQ(early.local_time(), "1969-12-31T23:59:58.500+00:00");
}

void ExpectInvalid(const v1::Recurrence& p, const std::string& message) {
  absl::StatusOr<Recurrence> r = Recurrence::FromProto("recurrence", p, kNow);
  ASSERT_FALSE(r.ok()) << p.ShortDebugString();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), StartsWith(message))
      << r.status();
}

// absl::LoadTimeZone opens any path it is given and caches every name it
// was asked for. Found reading the code for cron_fuzz: a client could read
// server files as zones, block a thread on a FIFO, or grow the cache
// without bound with made-up names.
TEST(RecurrenceTest, OnlyZonesOfTheZoneDatabaseAreLoaded) {
  for (const std::string& zone : std::vector<std::string>{
           "/etc/localtime", "../../../../usr/share/zoneinfo/Asia/Tokyo",
           "file:/usr/share/zoneinfo/America/New_York", "Europe/../Asia/Tokyo",
           "./UTC", "Europe//Berlin", "Europe/Berlin/", "Europe/Nowhere",
           "Etc/GMT+5 ", std::string(65, 'A'), std::string(1 << 20, 'a'),
           std::string("UTC\0x", 5)}) {
    absl::StatusOr<Recurrence> r =
        Recurrence::FromProto("recurrence", Cron("0 0 0 * * ?", zone), kNow);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << zone.substr(0, 80);
  }
  for (const char* zone :
       {"UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires",
        "America/Port-au-Prince", "Etc/GMT+5", "Etc/GMT-14"}) {
    EXPECT_TRUE(
        Recurrence::FromProto("recurrence", Cron("0 0 0 * * ?", zone), kNow)
            .ok())
        << zone;
  }
}

TEST(RecurrenceTest, EachRefusalNamesItsField) {
  ExpectInvalid(v1::Recurrence(), "recurrence: set one schedule");
  ExpectInvalid(Cron("0 0 0 * * ?", "Mars/Olympus"),
                "recurrence.cron.time_zone: unknown IANA time zone "
                "\"Mars/Olympus\"");
  ExpectInvalid(Cron("0 0 25 * * ?", "UTC"),
                "recurrence.cron.expression: at position 5 (hour field");
  ExpectInvalid(Cron(std::string(257, '*'), "UTC"),
                "recurrence.cron.expression: must be at most 256 bytes");
  ExpectInvalid(Cron("0 0 * * *", "UTC", static_cast<v1::CronDialect>(9)),
                "recurrence.cron.dialect: not a CronDialect: 9");
  ExpectInvalid(Every(999), "recurrence.every.interval: must be 1 s to 100");
  ExpectInvalid(Every(-1000), "recurrence.every.interval: must be 1 s");
  v1::Recurrence huge = Every(1000);
  huge.mutable_every()->mutable_interval()->set_seconds(INT64_MAX);
  ExpectInvalid(huge, "recurrence.every.interval: must be 1 s to 100 years");
  v1::Recurrence jitter = Every(1000);
  *jitter.mutable_jitter() = Dur(3'600'001);
  ExpectInvalid(jitter, "recurrence.jitter: must be 0 to 1 h");
  v1::Recurrence ends = Every(1000);
  *ends.mutable_start_at() = Ts(kNow);
  *ends.mutable_end_at() = Ts(kNow - 1);
  ExpectInvalid(ends, "recurrence.end_at: must not be before start_at");
  v1::Recurrence bad_time = Every(1000);
  bad_time.mutable_start_at()->set_nanos(-1);
  ExpectInvalid(bad_time, "recurrence.start_at: not a valid Timestamp");
  v1::Recurrence bad_misfire = Every(1000);
  bad_misfire.set_misfire(static_cast<v1::MisfirePolicy>(7));
  ExpectInvalid(bad_misfire, "recurrence.misfire: not a MisfirePolicy: 7");
  v1::Recurrence bad_overlap = Every(1000);
  bad_overlap.set_overlap(static_cast<v1::OverlapPolicy>(-1));
  ExpectInvalid(bad_overlap, "recurrence.overlap: not an OverlapPolicy: -1");
}

}  // namespace
}  // namespace delayd::server::recurring
