// HorizonLoader: the memory horizon (--memory-horizon, off by default).
// Only jobs due within the horizon from now have a timer (JobTimers); the
// others live only in the store. The loader thread, woken by a timer of its
// own (kHorizonTag) every quarter of the horizon, moves the horizon on and
// arms the jobs that came within it from the due index, each well before
// its due time.
//
// Why a job due within the horizon always has a timer in time: every Arm
// reads the horizon under JobTimers' lock, after the job's due entry is
// written; AdvanceHorizon moves the horizon first and scans the due index
// after. So a job written while the horizon moves is either armed by its
// own Arm (which saw the new horizon) or found by the scan (which started
// after its write). The loader runs every quarter of the horizon and arms
// jobs due up to a whole horizon ahead: each is armed about three quarters
// of the horizon before its due time (and a timer armed late fires at once —
// late, never early).
//
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_HORIZON_LOADER_H_
#define DELAYD_SERVER_CORE_HORIZON_LOADER_H_

#include <cstdint>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/jobs/job_timers.h"
#include "server/timer/clock.h"
#include "server/timer/scheduler.h"
#include "storage/job_store.h"

namespace delayd::server {

class HorizonLoader {
 public:
  // All must outlive the loader.
  HorizonLoader(storage::JobStore* store, timer::Clock* clock,
                JobTimers* timers, timer::Scheduler* scheduler)
      : store_(store), clock_(clock), timers_(timers), scheduler_(scheduler) {}
  HorizonLoader(const HorizonLoader&) = delete;
  HorizonLoader& operator=(const HorizonLoader&) = delete;
  ~HorizonLoader() { Stop(); }

  // Keeps timers only for jobs due within `horizon` from now (zero: no
  // horizon). REQUIRES: horizon zero or >= 1 s; called before Start and
  // before recovery reads HorizonEnd.
  void SetHorizon(absl::Duration horizon);
  bool enabled() const { return horizon_ms_ > 0; }
  // Where recovery puts the horizon at `now_ms`: now_ms + the horizon, or
  // JobTimers::kNoHorizon without one.
  int64_t HorizonEnd(int64_t now_ms) const;

  // With a horizon: starts the loader thread and its first timer. Stop
  // joins it; idempotent.
  void Start();
  void Stop();
  // Its timer (kHorizonTag) fired: move the horizon on, on the thread.
  void Wake();

 private:
  // How often the loader moves the horizon: a quarter of it, 100 ms-60 s.
  int64_t StepMs() const;
  void Loop();
  // Moves the horizon to now + horizon and arms the jobs it passed.
  void AdvanceHorizon();

  // Constant after construction (SetHorizon comes before Start).
  storage::JobStore* const store_;
  timer::Clock* const clock_;
  JobTimers* const timers_;
  timer::Scheduler* const scheduler_;
  int64_t horizon_ms_ = 0;  // 0: no memory horizon

  absl::Mutex mu_;
  bool due_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_HORIZON_LOADER_H_
