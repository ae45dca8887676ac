// The job record the store benchmarks write: topic "bench", a payload of
// `payload_bytes` bytes, the default retry policy, as a Schedule stores it.
// Header-only; shared by store_bench and herd_store_bench.
#ifndef DELAYD_BENCH_STORE_BENCH_JOB_H_
#define DELAYD_BENCH_STORE_BENCH_JOB_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/job_record.h"

namespace delayd::storage {

inline JobRecord MakeBenchJob(const std::string& id, int64_t now_ms,
                              int64_t due_ms, size_t payload_bytes) {
  JobRecord record;
  v1::Job* job = record.mutable_job();
  job->set_topic("bench");
  job->set_id(id);
  job->set_payload(std::string(payload_bytes, 'x'));
  job->set_state(v1::JOB_STATE_SCHEDULED);
  *job->mutable_fire_at() = UnixMsToTimestamp(due_ms);
  job->mutable_retry()->set_max_attempts(10);
  job->mutable_retry()->mutable_lease()->set_seconds(30);
  job->mutable_retry()->mutable_initial_backoff()->set_seconds(1);
  job->mutable_retry()->mutable_max_backoff()->set_seconds(600);
  job->mutable_retry()->set_backoff_multiplier(2);
  *job->mutable_created_at() = UnixMsToTimestamp(now_ms);
  *job->mutable_updated_at() = UnixMsToTimestamp(now_ms);
  record.set_spec_digest(now_ms * 31 + due_ms);
  return record;
}

}  // namespace delayd::storage

#endif  // DELAYD_BENCH_STORE_BENCH_JOB_H_
