// JobService: the memory horizon — jobs due beyond it live only in the
// store, and a loader arms them as the horizon moves on.
//
// Why a job due within the horizon always has a timer in time: every Arm
// reads the horizon under JobTimers's lock, after the job's due entry is
// written; AdvanceHorizon moves the horizon first and scans the due index
// after. So a job written while the horizon moves is either armed by its
// own Arm (which saw the new horizon) or found by the scan (which started
// after its write). The loader runs every quarter of the horizon and arms
// jobs due up to a whole horizon ahead: each is armed about three quarters
// of the horizon before its due time (and a timer armed late fires at once —
// late, never early).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "server/base/log.h"
#include "server/core/job_service.h"
#include "server/jobs/job_key.h"

namespace delayd::server {

void JobService::SetMemoryHorizon(absl::Duration horizon) {
  horizon_ms_ = absl::ToInt64Milliseconds(horizon);
}

int64_t JobService::HorizonStepMs() const {
  return std::clamp<int64_t>(horizon_ms_ / 4, 100, 60'000);
}

void JobService::HorizonLoop() {
  while (true) {
    {
      absl::MutexLock lock(&horizon_mu_);
      horizon_mu_.Await(absl::Condition(
          +[](JobService* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->horizon_mu_) {
            return s->horizon_stop_ || s->horizon_due_;
          },
          this));
      if (horizon_stop_) return;
      horizon_due_ = false;
    }
    AdvanceHorizon();
    scheduler_.Add(clock_->NowMs() + HorizonStepMs(), kHorizonTag);
  }
}

void JobService::AdvanceHorizon() {
  const int64_t old_end = timers_.horizon();
  const int64_t new_end = clock_->NowMs() + horizon_ms_;
  // A wall clock that stepped back leaves the horizon where it is: more
  // jobs than needed have timers, none too few.
  if (new_end <= old_end) return;
  timers_.SetHorizon(new_end);
  std::vector<JobTimers::Entry> entries;
  absl::Status scan = store_->ScanDue(
      old_end + 1, new_end + 1,
      [&](int64_t due_ms, std::string_view std_topic, std::string_view std_id) {
        const absl::string_view topic = AsAbsl(std_topic);
        const absl::string_view id = AsAbsl(std_id);
        entries.push_back({due_ms, KeyHash(topic, id), KeyCheck(topic, id)});
        return true;
      });
  if (!scan.ok()) {
    // Put the horizon back so that the next round scans this range again.
    DELAYD_LOG_ERROR("memory horizon: cannot read the due index: %s",
                     scan.ToString());
    timers_.SetHorizon(old_end);
    return;
  }
  timers_.AddHorizonTimers(entries);
}

}  // namespace delayd::server
