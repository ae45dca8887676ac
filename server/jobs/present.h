// How a stored job is shown to clients. Pure function; thread-safe.
#ifndef DELAYD_SERVER_JOBS_PRESENT_H_
#define DELAYD_SERVER_JOBS_PRESENT_H_

#include <cstdint>

#include "delayd/v1/delayd.pb.h"
#include "storage/job_record.h"

namespace delayd::server {

// The job as clients see it: READY is stored as SCHEDULED with a due time in
// the past (it is what the due index says, and what a restart makes of it
// anyway), so a SCHEDULED job whose time has come shows as READY. A
// recurring job is never READY: it is the schedule, not a delivery.
inline v1::Job PresentJob(const storage::JobRecord& record, int64_t now_ms) {
  v1::Job job = record.job();
  if (job.state() == v1::JOB_STATE_SCHEDULED && !job.has_recurring() &&
      storage::TimestampToUnixMs(job.fire_at()) <= now_ms) {
    job.set_state(v1::JOB_STATE_READY);
  }
  return job;
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_PRESENT_H_
