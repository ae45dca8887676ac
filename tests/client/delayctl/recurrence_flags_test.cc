// Unit tests of delayctl's recurring jobs without a server: the recurrence
// flags (recurrence_flags.h), how a recurring job and an occurrence are
// shown (job_text.h), and schedule's and reschedule's usage errors in-process.
#include "client/delayctl/recurrence_flags.h"

#include <sstream>

#include "absl/time/civil_time.h"
#include "client/delayctl/args.h"
#include "client/delayctl/delayctl.h"
#include "client/delayctl/job_text.h"
#include "delayd/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::delayctl {
namespace {

using ::testing::HasSubstr;

const absl::Time kNow = absl::FromCivil(
    absl::CivilSecond(2026, 11, 22, 6, 0, 0), absl::UTCTimeZone());

// `argv` parsed as schedule's recurrence flags would be.
Args Flags(const std::vector<std::string>& argv) {
  CommandSpec spec{"schedule", "", "", "", ScheduleFlags(), 0, 0};
  for (const FlagSpec& f : PolicyFlags()) spec.flags.push_back(f);
  absl::StatusOr<Args> a = Parse(spec, {}, argv);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : Args();
}

std::string Refusal(const std::vector<std::string>& argv) {
  absl::StatusOr<v1::Recurrence> r = RecurrenceFromFlags(Flags(argv), kNow);
  EXPECT_FALSE(r.ok()) << r->DebugString();
  return std::string(r.status().message());
}

TEST(RecurrenceFlagsTest, CronWithItsDialectZoneAndPolicies) {
  absl::StatusOr<v1::Recurrence> r = RecurrenceFromFlags(
      Flags({"--cron", "*/5 * * * *", "--dialect", "unix", "--tz",
             "Europe/Berlin", "--max-occurrences", "12", "--jitter", "1m30s",
             "--misfire", "fire-all", "--overlap", "allow"}),
      kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cron().expression(), "*/5 * * * *");
  EXPECT_EQ(r->cron().dialect(), v1::CRON_DIALECT_UNIX);
  EXPECT_EQ(r->cron().time_zone(), "Europe/Berlin");
  EXPECT_EQ(r->max_occurrences(), 12u);
  EXPECT_EQ(FromProto(r->jitter()), absl::Seconds(90));
  EXPECT_EQ(r->misfire(), v1::MISFIRE_POLICY_FIRE_ALL);
  EXPECT_EQ(r->overlap(), v1::OVERLAP_POLICY_ALLOW);

  // Absent flags leave their fields to the server's defaults.
  r = RecurrenceFromFlags(Flags({"--cron", "0 0 6 * * ?"}), kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cron().dialect(), v1::CRON_DIALECT_QUARTZ);
  EXPECT_EQ(r->cron().time_zone(), "");
  EXPECT_FALSE(r->has_start_at());
  EXPECT_FALSE(r->has_jitter());
  EXPECT_EQ(r->misfire(), v1::MISFIRE_POLICY_UNSPECIFIED);
  EXPECT_EQ(r->overlap(), v1::OVERLAP_POLICY_UNSPECIFIED);
}

TEST(RecurrenceFlagsTest, EveryWithTimesGivenAsDelaysFromNow) {
  absl::StatusOr<v1::Recurrence> r = RecurrenceFromFlags(
      Flags({"--every", "90s", "--anchor", "2026-11-22T05:00:00Z", "--start",
             "1h", "--end", "2026-11-23T00:00:00Z"}),
      kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FromProto(r->every().interval()), absl::Seconds(90));
  EXPECT_EQ(FromProto(r->every().anchor()), kNow - absl::Hours(1));
  EXPECT_EQ(FromProto(r->start_at()), kNow + absl::Hours(1));
  EXPECT_EQ(FromProto(r->end_at()), kNow + absl::Hours(18));
}

TEST(RecurrenceFlagsTest, RefusalsNameTheFlag) {
  EXPECT_THAT(Refusal({}), HasSubstr("give one of --cron EXPR, --every D"));
  EXPECT_THAT(Refusal({"--cron", "* * * * * ?", "--every", "1s"}),
              HasSubstr("give one of --cron EXPR, --every D"));
  EXPECT_EQ(Refusal({"--every", "1s", "--tz", "UTC"}),
            "--tz: only with --cron");
  EXPECT_EQ(Refusal({"--every", "1s", "--dialect", "unix"}),
            "--dialect: only with --cron");
  EXPECT_EQ(Refusal({"--cron", "* * * * * ?", "--anchor", "now"}),
            "--anchor: only with --every");
  EXPECT_EQ(Refusal({"--cron", "* * * * * ?", "--dialect", "vixie"}),
            "--dialect: 'vixie' is not one of quartz, unix");
  EXPECT_EQ(Refusal({"--every", "1s", "--misfire", "fire_once"}),
            "--misfire: 'fire_once' is not one of fire-once, skip, fire-all");
  EXPECT_EQ(Refusal({"--every", "1s", "--overlap", "unspecified"}),
            "--overlap: 'unspecified' is not one of skip, buffer-one, allow");
  EXPECT_EQ(Refusal({"--every", "1s", "--max-occurrences", "-1"}),
            "--max-occurrences: '-1' is not a non-negative integer");
  EXPECT_THAT(Refusal({"--every", "soon"}), HasSubstr("--every: 'soon'"));
  EXPECT_THAT(Refusal({"--every", "1s", "--jitter", "-1s"}),
              HasSubstr("--jitter"));
  EXPECT_THAT(Refusal({"--every", "1s", "--end", "tomorrow"}),
              HasSubstr("--end"));
}

TEST(RecurrenceFlagsTest, OptionalRecurrenceRefusesAFlagWithoutASchedule) {
  absl::StatusOr<std::optional<v1::Recurrence>> none =
      OptionalRecurrence(Flags({}), kNow);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  absl::StatusOr<std::optional<v1::Recurrence>> some =
      OptionalRecurrence(Flags({"--every", "1m"}), kNow);
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_TRUE(some->has_value());
  for (const char* flag : {"--tz", "--start", "--jitter", "--misfire"}) {
    absl::StatusOr<std::optional<v1::Recurrence>> stray =
        OptionalRecurrence(Flags({flag, "x"}), kNow);
    ASSERT_FALSE(stray.ok()) << flag;
    EXPECT_EQ(stray.status().message(),
              absl::StrCat(flag,
                           ": only for a recurring job (with --cron or "
                           "--every)"));
  }
}

v1::Job RecurringJob() {
  v1::Job job;
  job.set_topic("reports");
  job.set_id("daily");
  job.set_state(v1::JOB_STATE_PAUSED);
  job.set_payload("{}");
  job.mutable_retry()->set_max_attempts(10);
  *job.mutable_created_at() = ToProto(kNow - absl::Hours(50));
  *job.mutable_updated_at() = ToProto(kNow - absl::Hours(1));
  v1::RecurringStatus& status = *job.mutable_recurring();
  v1::Recurrence& r = *status.mutable_recurrence();
  r.mutable_cron()->set_expression("0 0 6 * * ?");
  r.mutable_cron()->set_time_zone("Europe/Berlin");
  *r.mutable_start_at() = job.created_at();
  r.set_max_occurrences(30);
  *r.mutable_jitter() = ToProto(absl::Seconds(90));
  r.set_overlap(v1::OVERLAP_POLICY_BUFFER_ONE);
  status.set_occurrences_fired(2);
  status.set_occurrences_skipped(1);
  *status.mutable_next_occurrence() = ToProto(kNow + absl::Hours(23));
  *status.mutable_last_occurrence() = ToProto(kNow - absl::Hours(1));
  *status.mutable_buffered_occurrence() = ToProto(kNow - absl::Minutes(1));
  return job;
}

TEST(RecurringJobTextTest, ARecurringJobShowsItsScheduleAndWhereItStands) {
  EXPECT_EQ(
      JobDetail(RecurringJob(), kNow),
      "topic        reports\n"
      "id           daily\n"
      "state        PAUSED\n"
      "schedule     cron '0 0 6 * * ?' (quartz, Europe/Berlin)\n"
      "start        2d2h ago (2026-11-20 04:00:00.000Z)\n"
      "policies     misfire fire-once, overlap buffer-one, jitter up to "
      "1m30s\n"
      "occurrences  2 fired of at most 30, 1 skipped\n"
      "next         in 23h (2026-11-23 05:00:00.000Z)\n"
      "last         1h ago (2026-11-22 05:00:00.000Z) as "
      "daily@1795323600000\n"
      "buffered     1m ago (2026-11-22 05:59:00.000Z), waiting for the last "
      "to end\n"
      "retry        lease 0ms, backoff 0ms x0 up to 0ms\n"
      "created      2d2h ago (2026-11-20 04:00:00Z)\n"
      "updated      1h ago (2026-11-22 05:00:00Z)\n"
      "payload      \"{}\"\n");
  EXPECT_EQ(JobLine(RecurringJob(), kNow),
            "reports/daily  PAUSED  cron '0 0 6 * * ?' (quartz, "
            "Europe/Berlin), next in 23h (2026-11-23 05:00:00Z)");

  v1::Job ended = RecurringJob();
  ended.set_state(v1::JOB_STATE_DONE);
  v1::RecurringStatus& status = *ended.mutable_recurring();
  status.clear_next_occurrence();
  status.clear_buffered_occurrence();
  status.clear_last_occurrence();
  *status.mutable_recurrence()->mutable_every()->mutable_interval() =
      ToProto(absl::Minutes(90));
  *status.mutable_recurrence()->mutable_every()->mutable_anchor() =
      ToProto(kNow);
  const std::string detail = JobDetail(ended, kNow);
  EXPECT_THAT(detail, HasSubstr("schedule     every 1h30m from 2026-11-22 "
                                "06:00:00.000Z\n"));
  EXPECT_THAT(detail, HasSubstr("next         none: the schedule has ended\n"));
  EXPECT_THAT(detail, HasSubstr("last         none yet\n"));
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("buffered")));
  EXPECT_EQ(JobLine(ended, kNow),
            "reports/daily  DONE  every 1h30m, next none: the schedule has "
            "ended");
}

TEST(RecurringJobTextTest, AnOccurrenceNamesTheJobItCameFrom) {
  v1::Job job;
  job.set_topic("reports");
  job.set_id("daily@1795323600000");
  job.set_state(v1::JOB_STATE_READY);
  *job.mutable_fire_at() = ToProto(kNow - absl::Seconds(30));
  job.mutable_occurrence_of()->set_id("daily");
  *job.mutable_occurrence_of()->mutable_nominal_time() =
      ToProto(kNow - absl::Hours(1));
  const std::string detail = JobDetail(job, kNow);
  EXPECT_THAT(detail,
              HasSubstr("occurrence of  daily at 2026-11-22 05:00:00.000Z\n"));
  EXPECT_THAT(detail, HasSubstr("due            30s ago"));
}

int RunInProcess(const std::vector<std::string>& args, std::string* err) {
  std::istringstream in;
  std::ostringstream out, e;
  const int code = Run(args, Io{&in, &out, &e});
  EXPECT_EQ(out.str(), "");
  *err = e.str();
  return code;
}

TEST(RecurringUsageTest, ARecurrenceAndAWhenExcludeEachOther) {
  std::string err;
  EXPECT_EQ(RunInProcess({"schedule", "t", "30s", "x", "--cron", "* * * * * ?"},
                         &err),
            kExitUsage);
  EXPECT_EQ(err,
            "delayctl: schedule: --cron and WHEN ('30s') exclude each other: "
            "a recurring job's recurrence says when\n");
  EXPECT_EQ(RunInProcess({"schedule", "t", "now", "--every", "1s"}, &err),
            kExitUsage);
  EXPECT_EQ(err,
            "delayctl: schedule: --every and WHEN ('now') exclude each other: "
            "a recurring job's recurrence says when (a payload that reads as "
            "a time goes by - or --payload-file)\n");
  EXPECT_EQ(RunInProcess({"reschedule", "t", "i", "1h", "--every", "1s"}, &err),
            kExitUsage);
  EXPECT_EQ(err,
            "delayctl: reschedule: --every and WHEN ('1h') exclude each "
            "other: a recurring job's recurrence says when\n");
  EXPECT_EQ(RunInProcess({"schedule", "t", "x", "--every", "1s",
                          "--payload-file", "/dev/null"},
                         &err),
            kExitUsage);
  EXPECT_THAT(err, HasSubstr("not both"));
  EXPECT_EQ(RunInProcess({"schedule", "t", "1m", "--overlap", "allow"}, &err),
            kExitUsage);
  EXPECT_EQ(err,
            "delayctl: --overlap: only for a recurring job (with --cron or "
            "--every)\n");
  EXPECT_EQ(RunInProcess({"preview", "--every", "1s", "--jitter", "1s"}, &err),
            kExitUsage);
  EXPECT_THAT(err, HasSubstr("unknown flag --jitter"));
}

}  // namespace
}  // namespace delayd::delayctl
