// The job a floor server puts in its reply to Schedule: what delayd would
// show for the spec (defaults filled in, times set), built without checking
// anything. Shared by floor_server and floor_unary so both reply with
// messages of delayd's size.
#ifndef DELAYD_BENCH_FLOOR_FLOOR_JOB_H_
#define DELAYD_BENCH_FLOOR_FLOOR_JOB_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::floor {

inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

inline google::protobuf::Timestamp Ts(int64_t ms) {
  google::protobuf::Timestamp t;
  t.set_seconds(ms / 1000);
  t.set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
  return t;
}

// A Timestamp or a Duration in milliseconds (unchecked, as the floor is).
template <typename T>
int64_t ToMs(const T& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

inline v1::Job ReplyJob(const v1::JobSpec& spec, int64_t now_ms,
                        int64_t lease_ms) {
  v1::Job job;
  job.set_topic(spec.topic());
  job.set_id(spec.id());
  job.set_payload(spec.payload());
  job.set_state(v1::JOB_STATE_SCHEDULED);
  int64_t due = now_ms;
  if (spec.has_fire_at()) {
    due = ToMs(spec.fire_at());
  } else if (spec.has_delay()) {
    due += ToMs(spec.delay());
  }
  *job.mutable_fire_at() = Ts(due);
  v1::RetryPolicy* retry = job.mutable_retry();
  retry->set_max_attempts(10);
  retry->mutable_lease()->set_seconds(lease_ms / 1000);
  retry->mutable_initial_backoff()->set_seconds(1);
  retry->mutable_max_backoff()->set_seconds(600);
  retry->set_backoff_multiplier(2);
  *job.mutable_labels() = spec.labels();
  *job.mutable_created_at() = Ts(now_ms);
  *job.mutable_updated_at() = Ts(now_ms);
  return job;
}

}  // namespace delayd::floor

#endif  // DELAYD_BENCH_FLOOR_FLOOR_JOB_H_
