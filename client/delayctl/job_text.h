// How delayctl shows jobs to people: state names, a job's detail block, the
// one-line summary used after a change. Pure functions; thread-compatible.
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

// "orders.close/order-8812".
std::string KeyText(const std::string& topic, const std::string& id);

// "orders.close/order-8812  SCHEDULED  due in 29m58s (2026-11-22 06:30:00Z)".
std::string JobLine(const v1::Job& job, absl::Time now);

// Every field of a job, one per line, names aligned.
std::string JobDetail(const v1::Job& job, absl::Time now);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_JOB_TEXT_H_
