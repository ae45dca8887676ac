// How delayctl shows jobs to people: state and policy names, a job's detail
// block (with a recurring job's schedule and where it stands), the one-line
// summary used after a change. Pure functions; thread-compatible.
#ifndef DELAYD_CLIENT_DELAYCTL_JOB_TEXT_H_
#define DELAYD_CLIENT_DELAYCTL_JOB_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::delayctl {

// "SCHEDULED" for JOB_STATE_SCHEDULED.
std::string StateName(v1::JobState state);
// "scheduled", "SCHEDULED", "JOB_STATE_SCHEDULED", "in-flight" → the state.
absl::StatusOr<v1::JobState> ParseState(const std::string& text);

// The names delayctl's flags use: "quartz", "fire-once", "buffer-one". An
// UNSPECIFIED value shows as the default it stands for.
std::string DialectName(v1::CronDialect dialect);
std::string MisfireName(v1::MisfirePolicy policy);
std::string OverlapName(v1::OverlapPolicy policy);

// A recurrence's schedule: "cron '0 30 2 * * ?' (quartz, America/New_York)"
// or "every 1m30s".
std::string ScheduleText(const v1::Recurrence& recurrence);

// "orders.close/order-8812".
std::string KeyText(const std::string& topic, const std::string& id);

// "orders.close/order-8812  SCHEDULED  due in 29m58s (2026-11-22 06:30:00Z)";
// for a recurring job "reports/daily  SCHEDULED  every 1h, next in 59m58s
// (2026-11-22 07:00:00Z)".
std::string JobLine(const v1::Job& job, absl::Time now);

// Every field of a job, one per line, names aligned. A recurring job shows
// its schedule, policies, occurrence counts and next, last and buffered
// occurrences instead of a due time and attempts (it is never delivered
// itself); an occurrence shows "occurrence of <id> at <nominal time>".
std::string JobDetail(const v1::Job& job, absl::Time now);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_JOB_TEXT_H_
