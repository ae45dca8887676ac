#include "client/delayctl/job_text.h"

#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "client/delayctl/format.h"
#include "delayd/proto_time.h"

namespace delayd::delayctl {
namespace {

// "MISFIRE_POLICY_FIRE_ONCE" less `prefix` is "fire-once"; a value this
// build does not know is its number.
std::string FlagName(const std::string& enum_name, absl::string_view prefix,
                     int value) {
  if (enum_name.empty()) return absl::StrCat(value);
  std::string name =
      absl::AsciiStrToLower(absl::StripPrefix(enum_name, prefix));
  absl::StrReplaceAll({{"_", "-"}}, &name);
  return name;
}

std::string NextText(const v1::RecurringStatus& r, absl::Time now,
                     bool millis) {
  return r.has_next_occurrence()
             ? RelativeTime(FromProto(r.next_occurrence()), now, millis)
             : "none: the schedule has ended";
}

// The rows of a recurring job's detail that stand for "due" and "attempts".
void AddRecurringRows(const v1::Job& job, absl::Time now,
                      std::vector<std::vector<std::string>>& rows) {
  const v1::RecurringStatus& status = job.recurring();
  const v1::Recurrence& r = status.recurrence();
  std::string schedule = ScheduleText(r);
  if (r.has_every() && r.every().has_anchor()) {
    absl::StrAppend(&schedule, " from ",
                    AbsoluteTime(FromProto(r.every().anchor()), true));
  }
  rows.push_back({"schedule", schedule});
  if (r.has_start_at()) {
    rows.push_back({"start", RelativeTime(FromProto(r.start_at()), now, true)});
  }
  if (r.has_end_at()) {
    rows.push_back({"end", RelativeTime(FromProto(r.end_at()), now, true)});
  }
  std::string policies = absl::StrCat("misfire ", MisfireName(r.misfire()),
                                      ", overlap ", OverlapName(r.overlap()));
  if (FromProto(r.jitter()) > absl::ZeroDuration()) {
    absl::StrAppend(&policies, ", jitter up to ",
                    absl::FormatDuration(FromProto(r.jitter())));
  }
  rows.push_back({"policies", policies});
  std::string counts = absl::StrCat(status.occurrences_fired(), " fired");
  if (r.max_occurrences() != 0) {
    absl::StrAppend(&counts, " of at most ", r.max_occurrences());
  }
  absl::StrAppend(&counts, ", ", status.occurrences_skipped(), " skipped");
  rows.push_back({"occurrences", counts});
  rows.push_back({"next", NextText(status, now, true)});
  if (status.has_last_occurrence()) {
    const absl::Time last = FromProto(status.last_occurrence());
    rows.push_back(
        {"last", absl::StrCat(RelativeTime(last, now, true), " as ", job.id(),
                              "@", absl::ToUnixMillis(last))});
  } else {
    rows.push_back({"last", "none yet"});
  }
  if (status.has_buffered_occurrence()) {
    rows.push_back(
        {"buffered",
         absl::StrCat(
             RelativeTime(FromProto(status.buffered_occurrence()), now, true),
             ", waiting for the last to end")});
  }
}

}  // namespace

std::string StateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  return name.substr(std::string("JOB_STATE_").size());
}

absl::StatusOr<v1::JobState> ParseState(const std::string& text) {
  std::string name = absl::AsciiStrToUpper(text);
  absl::StrReplaceAll({{"-", "_"}}, &name);
  if (name.rfind("JOB_STATE_", 0) != 0) name = "JOB_STATE_" + name;
  v1::JobState state;
  if (!v1::JobState_Parse(name, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state: unknown state '", text,
                     "' (scheduled, ready, in-flight, dead, done, canceled, "
                     "paused)"));
  }
  return state;
}

std::string DialectName(v1::CronDialect dialect) {
  if (dialect == v1::CRON_DIALECT_UNSPECIFIED) {
    dialect = v1::CRON_DIALECT_QUARTZ;
  }
  return FlagName(v1::CronDialect_Name(dialect), "CRON_DIALECT_", dialect);
}

std::string MisfireName(v1::MisfirePolicy policy) {
  if (policy == v1::MISFIRE_POLICY_UNSPECIFIED) {
    policy = v1::MISFIRE_POLICY_FIRE_ONCE;
  }
  return FlagName(v1::MisfirePolicy_Name(policy), "MISFIRE_POLICY_", policy);
}

std::string OverlapName(v1::OverlapPolicy policy) {
  if (policy == v1::OVERLAP_POLICY_UNSPECIFIED) {
    policy = v1::OVERLAP_POLICY_SKIP;
  }
  return FlagName(v1::OverlapPolicy_Name(policy), "OVERLAP_POLICY_", policy);
}

std::string ScheduleText(const v1::Recurrence& recurrence) {
  switch (recurrence.schedule_case()) {
    case v1::Recurrence::kCron: {
      const v1::CronSchedule& cron = recurrence.cron();
      return absl::StrCat(
          "cron '", cron.expression(), "' (", DialectName(cron.dialect()), ", ",
          cron.time_zone().empty() ? "UTC" : cron.time_zone(), ")");
    }
    case v1::Recurrence::kEvery:
      return absl::StrCat(
          "every ",
          absl::FormatDuration(FromProto(recurrence.every().interval())));
    default:
      return "no schedule";
  }
}

std::string KeyText(const std::string& topic, const std::string& id) {
  return absl::StrCat(topic, "/", id);
}

std::string JobLine(const v1::Job& job, absl::Time now) {
  if (job.has_recurring()) {
    return absl::StrCat(KeyText(job.topic(), job.id()), "  ",
                        StateName(job.state()), "  ",
                        ScheduleText(job.recurring().recurrence()), ", next ",
                        NextText(job.recurring(), now, false));
  }
  return absl::StrCat(KeyText(job.topic(), job.id()), "  ",
                      StateName(job.state()), "  due ",
                      RelativeTime(FromProto(job.fire_at()), now));
}

std::string JobDetail(const v1::Job& job, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"topic", job.topic()},
      {"id", job.id()},
      {"state", StateName(job.state())},
  };
  if (job.has_occurrence_of()) {
    rows.push_back(
        {"occurrence of",
         absl::StrCat(
             job.occurrence_of().id(), " at ",
             AbsoluteTime(FromProto(job.occurrence_of().nominal_time()),
                          /*millis=*/true))});
  }
  if (job.has_recurring()) {
    AddRecurringRows(job, now, rows);
  } else {
    rows.push_back(
        {"due", RelativeTime(FromProto(job.fire_at()), now, /*millis=*/true)});
    rows.push_back({"attempts", absl::StrCat(job.attempts(), " of ",
                                             job.retry().max_attempts())});
  }
  const v1::RetryPolicy& r = job.retry();
  rows.push_back(
      {"retry",
       absl::StrCat("lease ", HumanDuration(FromProto(r.lease())), ", backoff ",
                    HumanDuration(FromProto(r.initial_backoff())), " x",
                    r.backoff_multiplier(), " up to ",
                    HumanDuration(FromProto(r.max_backoff())))});
  if (!job.labels().empty()) {
    // Sorted: a proto map has no order.
    std::map<std::string, std::string> labels(job.labels().begin(),
                                              job.labels().end());
    rows.push_back(
        {"labels", absl::StrJoin(labels, ", ", absl::PairFormatter("="))});
  }
  rows.push_back({"created", RelativeTime(FromProto(job.created_at()), now)});
  rows.push_back({"updated", RelativeTime(FromProto(job.updated_at()), now)});
  if (!job.last_error().empty()) {
    rows.push_back({"last error", job.last_error()});
  }
  rows.push_back({"payload", PayloadPreview(job.payload(), 200)});
  return Table(rows);
}

}  // namespace delayd::delayctl
