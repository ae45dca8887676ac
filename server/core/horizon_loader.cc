#include "server/core/horizon_loader.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "server/base/log.h"
#include "server/base/saturating.h"
#include "server/jobs/job_key.h"

namespace delayd::server {

void HorizonLoader::SetHorizon(absl::Duration horizon) {
  horizon_ms_ = absl::ToInt64Milliseconds(horizon);
}

int64_t HorizonLoader::HorizonEnd(int64_t now_ms) const {
  return horizon_ms_ > 0 ? SaturatingAdd(now_ms, horizon_ms_)
                         : JobTimers::kNoHorizon;
}

void HorizonLoader::Start() {
  if (horizon_ms_ <= 0) return;
  thread_ = std::thread(&HorizonLoader::Loop, this);
  scheduler_->Add(clock_->NowMs() + StepMs(), kHorizonTag);
}

void HorizonLoader::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void HorizonLoader::Wake() {
  absl::MutexLock lock(&mu_);
  due_ = true;
}

int64_t HorizonLoader::StepMs() const {
  return std::clamp<int64_t>(horizon_ms_ / 4, 100, 60'000);
}

void HorizonLoader::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](HorizonLoader* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(h->mu_) {
            return h->stop_ || h->due_;
          },
          this));
      if (stop_) return;
      due_ = false;
    }
    AdvanceHorizon();
    scheduler_->Add(clock_->NowMs() + StepMs(), kHorizonTag);
  }
}

void HorizonLoader::AdvanceHorizon() {
  const int64_t old_end = timers_->horizon();
  const int64_t new_end = SaturatingAdd(clock_->NowMs(), horizon_ms_);
  // A wall clock that stepped back leaves the horizon where it is: more
  // jobs than needed have timers, none too few.
  if (new_end <= old_end) return;
  timers_->SetHorizon(new_end);
  std::vector<JobTimers::Entry> entries;
  absl::Status scan = store_->ScanDue(
      SaturatingAdd(old_end, 1), SaturatingAdd(new_end, 1),
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
    timers_->SetHorizon(old_end);
    return;
  }
  timers_->AddHorizonTimers(entries);
}

}  // namespace delayd::server
