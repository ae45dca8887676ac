#include "client/handler_status.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "delayd/client.h"

namespace delayd::client {
namespace {

constexpr char kRetryAfterUrl[] = "type.delayd.dev/client.RetryAfterMs";
constexpr char kDeadLetterUrl[] = "type.delayd.dev/client.DeadLetter";

}  // namespace

absl::Status RetryAfter(absl::Status error, absl::Duration retry_after) {
  error.SetPayload(kRetryAfterUrl,
                   absl::Cord(std::to_string(absl::ToInt64Milliseconds(
                       std::max(retry_after, absl::ZeroDuration())))));
  return error;
}

absl::Status DeadLetter(absl::Status error) {
  error.SetPayload(kDeadLetterUrl, absl::Cord("1"));
  return error;
}

NackPlan NackPlanOf(const absl::Status& error) {
  NackPlan plan;
  if (auto ms = error.GetPayload(kRetryAfterUrl); ms.has_value()) {
    int64_t value = 0;
    if (absl::SimpleAtoi(std::string(*ms), &value)) {
      plan.retry_after = absl::Milliseconds(value);
    }
  }
  plan.dead_letter = error.GetPayload(kDeadLetterUrl).has_value();
  return plan;
}

v1::JobSpec JobAfter(const std::string& topic, const std::string& id,
                     const std::string& payload, absl::Duration delay) {
  v1::JobSpec spec;
  spec.set_topic(topic);
  spec.set_id(id);
  spec.set_payload(payload);
  *spec.mutable_delay() = ToProto(delay);
  return spec;
}

v1::JobSpec JobAt(const std::string& topic, const std::string& id,
                  const std::string& payload, absl::Time fire_at) {
  v1::JobSpec spec;
  spec.set_topic(topic);
  spec.set_id(id);
  spec.set_payload(payload);
  *spec.mutable_fire_at() = ToProto(fire_at);
  return spec;
}

}  // namespace delayd::client
