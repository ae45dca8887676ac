// delayctl's recurrence flags: the flags that describe a delayd.v1.Recurrence
// (--cron or --every and their options, the bounds, the policies), their
// help lines, and the reading of a parsed command line into the message.
// preview, schedule and reschedule share them. Pure functions (the current
// time is an argument); thread-compatible.
#ifndef DELAYD_CLIENT_DELAYCTL_RECURRENCE_FLAGS_H_
#define DELAYD_CLIENT_DELAYCTL_RECURRENCE_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/delayctl/args.h"
#include "delayd/v1/recurrence.pb.h"

namespace delayd::delayctl {

// When the occurrences are: --cron, --dialect, --tz, --every, --anchor,
// --start, --end.
std::vector<FlagSpec> ScheduleFlags();
// What only a recurring job has: --max-occurrences, --jitter, --misfire,
// --overlap.
std::vector<FlagSpec> PolicyFlags();

// Whether --cron or --every was given: the command line is recurring.
bool IsRecurring(const Args& a);
// "--cron" or "--every", whichever was given, to name it in errors.
// REQUIRES: IsRecurring(a).
std::string RecurringFlag(const Args& a);

// The Recurrence the flags describe; a time given as a delay counts from
// `now`. INVALID_ARGUMENT naming the flag: neither or both of --cron and
// --every, an option of the other kind (--tz with --every, --anchor with
// --cron), a bad value.
absl::StatusOr<v1::Recurrence> RecurrenceFromFlags(const Args& a,
                                                   absl::Time now);

// For commands that make either kind of job: RecurrenceFromFlags when
// IsRecurring(a); else nullopt, or INVALID_ARGUMENT naming a recurrence flag
// given without --cron or --every.
absl::StatusOr<std::optional<v1::Recurrence>> OptionalRecurrence(
    const Args& a, absl::Time now);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_RECURRENCE_FLAGS_H_
