// How a handler's error asks to be nacked: RetryAfter and DeadLetter (in
// delayd/client.h) attach payloads to the status; NackPlanOf reads them.
// Stateless; thread-safe.
#ifndef DELAYD_CLIENT_HANDLER_STATUS_H_
#define DELAYD_CLIENT_HANDLER_STATUS_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace delayd::client {

struct NackPlan {
  // Unset: the job's retry backoff.
  std::optional<absl::Duration> retry_after;
  bool dead_letter = false;
};

NackPlan NackPlanOf(const absl::Status& error);

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_HANDLER_STATUS_H_
