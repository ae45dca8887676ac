// End-to-end tests of delayctl's recurring jobs: schedule --cron/--every,
// reschedule with a new recurrence, pause, resume, and how get shows a
// recurring job and its occurrences. The real delayctl against the real
// delayd; --json output parsed back into the API's messages.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/delayctl/cli_process.h"
#include "tests/client/delayctl/delayctl_fixture.h"
#include "tests/support/poll.h"

namespace delayd::testing {
namespace {

using ::testing::HasSubstr;

class DelayctlRecurringTest : public DelayctlServerTest {
 protected:
  static v1::Job GetJson(const std::string& topic, const std::string& id) {
    CliResult r = Ctl({"get", topic, id, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return FromJson<v1::Job>(r.out);
  }
};

TEST_F(DelayctlRecurringTest, ScheduleEveryMakesARecurringJobThatGetShows) {
  CliResult r = Ctl({"schedule", "rec.every", "{\"n\":1}", "--id", "tick",
                     "--every", "1s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const v1::Job job = FromJson<v1::ScheduleResponse>(r.out).job();
  EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(job.payload(), "{\"n\":1}");
  ASSERT_TRUE(job.has_recurring());
  const v1::Recurrence& recurrence = job.recurring().recurrence();
  ASSERT_TRUE(recurrence.has_every());
  EXPECT_EQ(FromProto(recurrence.every().interval()), absl::Seconds(1));
  EXPECT_TRUE(job.recurring().has_next_occurrence());

  r = Ctl({"get", "rec.every", "tick"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("state        SCHEDULED\n"));
  EXPECT_THAT(r.out, HasSubstr("schedule     every 1s from "));
  EXPECT_THAT(r.out, HasSubstr("policies     misfire fire-once, overlap skip"));
  EXPECT_THAT(r.out, HasSubstr("\noccurrences  "));
  EXPECT_THAT(r.out, HasSubstr("\nnext         "));
  EXPECT_THAT(r.out, HasSubstr("\nlast         "));
  EXPECT_THAT(r.out, HasSubstr("payload      \"{\\\"n\\\":1}\"\n"));
  // A recurring job is never delivered itself: no due time, no attempts.
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("attempts")));

  // Its first occurrence becomes a job <id>@<nominal ms>, which names it.
  v1::Job parent;
  ASSERT_TRUE(PollUntil(
      [&] {
        parent = GetJson("rec.every", "tick");
        return parent.recurring().occurrences_fired() >= 1;
      },
      absl::Seconds(30), absl::Milliseconds(50)))
      << parent.DebugString();
  const absl::Time last = FromProto(parent.recurring().last_occurrence());
  const std::string child = absl::StrCat("tick@", absl::ToUnixMillis(last));
  r = Ctl({"get", "rec.every", "tick"});
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(" as ", child, "\n")));
  r = Ctl({"get", "rec.every", child});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.out, HasSubstr(absl::StrCat("occurrence of  tick at ",
                                    absl::FormatTime("%Y-%m-%d %H:%M:%E3SZ",
                                                     last, absl::UTCTimeZone()),
                                    "\n")));
  EXPECT_THAT(r.out, HasSubstr("payload        \"{\\\"n\\\":1}\"\n"));
  EXPECT_EQ(GetJson("rec.every", child).occurrence_of().id(), "tick");

  // The line after a change says the schedule and the next occurrence.
  r = Ctl({"schedule", "rec.every", "--id", "hourly", "--every", "1h"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(
      r.out, "scheduled  rec.every/hourly  SCHEDULED  every 1h, next "))
      << r.out;
  ASSERT_EQ(Ctl({"cancel", "rec.every", "tick"}).exit_code, 0);
}

TEST_F(DelayctlRecurringTest, ScheduleCronInATimeZoneWithItsPolicies) {
  CliResult r = Ctl({"schedule", "rec.cron", "report", "--id", "nine", "--cron",
                     "0 30 9 * * ?", "--tz", "America/New_York", "--misfire",
                     "skip", "--overlap", "buffer-one", "--jitter", "2s",
                     "--max-occurrences", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const v1::Job job = FromJson<v1::ScheduleResponse>(r.out).job();
  const v1::Recurrence& recurrence = job.recurring().recurrence();
  EXPECT_EQ(recurrence.cron().expression(), "0 30 9 * * ?");
  EXPECT_EQ(recurrence.cron().dialect(), v1::CRON_DIALECT_QUARTZ);
  EXPECT_EQ(recurrence.cron().time_zone(), "America/New_York");
  EXPECT_EQ(recurrence.misfire(), v1::MISFIRE_POLICY_SKIP);
  EXPECT_EQ(recurrence.overlap(), v1::OVERLAP_POLICY_BUFFER_ONE);
  EXPECT_EQ(FromProto(recurrence.jitter()), absl::Seconds(2));
  EXPECT_EQ(recurrence.max_occurrences(), 5u);
  // The next occurrence is 09:30 in New York, whatever its offset that day.
  absl::TimeZone new_york;
  ASSERT_TRUE(absl::LoadTimeZone("America/New_York", &new_york));
  const absl::CivilSecond local = absl::ToCivilSecond(
      FromProto(job.recurring().next_occurrence()), new_york);
  EXPECT_EQ(local.hour(), 9);
  EXPECT_EQ(local.minute(), 30);
  EXPECT_EQ(local.second(), 0);

  r = Ctl({"get", "rec.cron", "nine"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("schedule     cron '0 30 9 * * ?' (quartz, "
                               "America/New_York)\n"));
  EXPECT_THAT(r.out, HasSubstr("policies     misfire skip, overlap "
                               "buffer-one, jitter up to 2s\n"));
  EXPECT_THAT(r.out, HasSubstr("occurrences  0 fired of at most 5, 0 "
                               "skipped\n"));
  EXPECT_THAT(r.out, HasSubstr("last         none yet\n"));

  r = Ctl({"schedule", "rec.cron", "--id", "weekdays", "--cron",
           "30 9 * * MON-FRI", "--dialect", "unix", "--tz", "Europe/Berlin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("cron '30 9 * * MON-FRI' (unix, Europe/Berlin), next"));

  // The server judges the zone, and says which field.
  r = Ctl({"schedule", "rec.cron", "--id", "mars", "--cron", "0 0 9 * * ?",
           "--tz", "Mars/Olympus"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("time_zone"));
}

TEST_F(DelayctlRecurringTest, PauseShowsPausedAndResumeShowsScheduled) {
  ASSERT_EQ(
      Ctl({"schedule", "rec.pause", "--id", "p", "--every", "1h"}).exit_code,
      0);
  CliResult r = Ctl({"pause", "rec.pause", "p"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("state        PAUSED\n"));
  EXPECT_THAT(r.out, HasSubstr("schedule     every 1h from "));
  r = Ctl({"get", "rec.pause", "p"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("state        PAUSED\n"));
  EXPECT_EQ(GetJson("rec.pause", "p").state(), v1::JOB_STATE_PAUSED);
  r = Ctl({"list", "rec.pause", "--state", "paused", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto paused = FromJson<v1::ListJobsResponse>(r.out);
  ASSERT_EQ(paused.jobs_size(), 1);
  EXPECT_EQ(paused.jobs(0).id(), "p");
  // Pausing a paused job changes nothing.
  r = Ctl({"pause", "rec.pause", "p", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::PauseJobResponse>(r.out).job().state(),
            v1::JOB_STATE_PAUSED);

  r = Ctl({"resume", "rec.pause", "p"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("state        SCHEDULED\n"));
  r = Ctl({"get", "rec.pause", "p"});
  EXPECT_THAT(r.out, HasSubstr("state        SCHEDULED\n"));
  r = Ctl({"resume", "rec.pause", "p", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ResumeJobResponse>(r.out).job().state(),
            v1::JOB_STATE_SCHEDULED);

  // Only a recurring job pauses; the server's refusal is one line, exit 1.
  ASSERT_EQ(Ctl({"schedule", "rec.pause", "1h", "--id", "once"}).exit_code, 0);
  r = Ctl({"pause", "rec.pause", "once"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  r = Ctl({"resume", "rec.pause", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
}

TEST_F(DelayctlRecurringTest, ARecurrenceWithAWhenIsAUsageErrorNamingBoth) {
  // Both WHEN and a payload: WHEN cannot be meant as the payload.
  CliResult r = Ctl({"schedule", "rec.usage", "30s", "x", "--id", "both",
                     "--cron", "0 * * * * ?"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--cron and WHEN ('30s')"));
  // A lone argument that reads as a time is taken for WHEN, not a payload.
  r = Ctl({"schedule", "rec.usage", "2026-12-01T00:00:00Z", "--id", "lone",
           "--every", "1m"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--every and WHEN ('2026-12-01T00:00:00Z')"));
  // A recurrence's own flags without --cron or --every.
  r = Ctl(
      {"schedule", "rec.usage", "1m", "x", "--id", "stray", "--jitter", "5s"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--jitter"));
  // Nothing was scheduled.
  r = Ctl({"list", "rec.usage", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r.out).jobs_size(), 0);

  // reschedule the same way; the job keeps its recurrence.
  ASSERT_EQ(
      Ctl({"schedule", "rec.usage2", "--id", "r", "--every", "1h"}).exit_code,
      0);
  r = Ctl({"reschedule", "rec.usage2", "r", "5m", "--every", "2h"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--every and WHEN ('5m')"));
  EXPECT_EQ(FromProto(GetJson("rec.usage2", "r")
                          .recurring()
                          .recurrence()
                          .every()
                          .interval()),
            absl::Hours(1));
}

TEST_F(DelayctlRecurringTest, RescheduleWithEveryChangesTheRecurrence) {
  ASSERT_EQ(Ctl({"schedule", "rec.resched", "--id", "r", "--every", "1h",
                 "--misfire", "skip"})
                .exit_code,
            0);
  CliResult r =
      Ctl({"reschedule", "rec.resched", "r", "--every", "2h", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const v1::Job job = FromJson<v1::RescheduleResponse>(r.out).job();
  const v1::Recurrence& recurrence = job.recurring().recurrence();
  EXPECT_EQ(FromProto(recurrence.every().interval()), absl::Hours(2));
  // The new recurrence replaces the whole old one.
  EXPECT_EQ(recurrence.misfire(), v1::MISFIRE_POLICY_UNSPECIFIED);
  EXPECT_TRUE(job.recurring().has_next_occurrence());
  r = Ctl({"get", "rec.resched", "r"});
  EXPECT_THAT(r.out, HasSubstr("schedule     every 2h from "));

  r = Ctl({"reschedule", "rec.resched", "r", "--cron", "0 0 12 * * ?"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out,
                               "rescheduled  rec.resched/r  SCHEDULED  cron "
                               "'0 0 12 * * ?' (quartz, UTC), next in "))
      << r.out;

  // A recurring job takes no WHEN, a one-shot job no recurrence: the
  // server's refusals.
  r = Ctl({"reschedule", "rec.resched", "r", "1h"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("recurring"));
  ASSERT_EQ(Ctl({"schedule", "rec.resched", "1h", "--id", "once"}).exit_code,
            0);
  r = Ctl({"reschedule", "rec.resched", "once", "--every", "1h"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneErrorLine(r);
  // Neither WHEN nor a recurrence.
  r = Ctl({"reschedule", "rec.resched", "once"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r);
}

TEST(DelayctlRecurringUsageTest, HelpOfTheRecurringCommandsHasAnExample) {
  for (const char* command :
       {"schedule", "preview", "get", "reschedule", "pause", "resume"}) {
    CliResult r = RunCli({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("  delayctl ", command, " ")))
        << r.out;
  }
  CliResult r = RunCli({"schedule", "--help"});
  for (const char* flag : {"--cron EXPR", "--every DURATION", "--misfire",
                           "--overlap", "--jitter", "--max-occurrences"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(RunCli({"reschedule", "--help"}).out, HasSubstr("--every"));
}

}  // namespace
}  // namespace delayd::testing
