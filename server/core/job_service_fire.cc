// JobService: recovery from the store, and the fire path — fired timer tags
// matched against the due index and moved to their topic's ready queue.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"
#include "server/base/log.h"
#include "server/core/job_service.h"
#include "server/jobs/job_key.h"

namespace delayd::server {

absl::StatusOr<JobService::RecoveryStats> JobService::Recover() {
  const absl::Time start = absl::Now();
  const int64_t now_ms = clock_->NowMs();
  // Jobs beyond the memory horizon are counted but get no timer.
  const int64_t horizon_end =
      horizon_ms_ > 0 ? now_ms + horizon_ms_ : JobTimers::kNoHorizon;
  timers_.SetHorizon(horizon_end);
  RecoveryStats stats;
  std::vector<JobTimers::Entry> entries;
  std::string last_topic;
  int64_t run = 0;  // jobs of last_topic not yet added to the counts
  absl::Status scan = store_->ScanDue(
      0, std::numeric_limits<int64_t>::max(),
      [&](int64_t due_ms, std::string_view std_topic, std::string_view std_id) {
        const absl::string_view topic = AsAbsl(std_topic);
        const absl::string_view id = AsAbsl(std_id);
        if (due_ms <= horizon_end) {
          entries.push_back({due_ms, KeyHash(topic, id), KeyCheck(topic, id)});
        }
        ++stats.jobs;
        if (due_ms <= now_ms) ++stats.overdue;
        if (topic != last_topic) {
          if (run > 0) topics_.AddLive(last_topic, run);
          last_topic = std::string(topic);
          run = 0;
        }
        ++run;
        return true;
      });
  if (!scan.ok()) return scan;
  if (run > 0) topics_.AddLive(last_topic, run);
  timers_.ArmBatch(entries);
  stats.duration = absl::Now() - start;
  return stats;
}

void JobService::Start() {
  scheduler_.Start();
  fire_thread_ = std::thread(&JobService::FireLoop, this);
  deliverer_->Start();
  if (horizon_ms_ > 0) {
    horizon_thread_ = std::thread(&JobService::HorizonLoop, this);
    scheduler_.Add(clock_->NowMs() + HorizonStepMs(), kHorizonTag);
  }
  sweeper_.Start();
  dead_scan_thread_ = std::thread([this] {
    const absl::Time start = absl::Now();
    std::vector<JobKey> canceled;
    if (absl::Status s = dead_.Scan(*store_, locks_, dead_scan_stop_, canceled);
        !s.ok()) {
      DELAYD_LOG_ERROR("counting DEAD, DONE and CANCELED jobs: %s",
                       s.ToString());
      return;
    }
    if (dead_scan_stop_) return;
    if (const absl::Duration took = absl::Now() - start;
        took > absl::Seconds(1) || !canceled.empty()) {
      DELAYD_LOG_INFO(
          "counted DEAD, DONE and CANCELED jobs in %s; %d canceled records "
          "left over",
          absl::FormatDuration(took), canceled.size());
    }
    deliverer_->RemoveLeftoverCanceled(std::move(canceled));
  });
}

void JobService::Stop() {
  dead_scan_stop_ = true;
  scheduler_.Stop();
  {
    absl::MutexLock lock(&fire_mu_);
    fire_stop_ = true;
  }
  if (fire_thread_.joinable()) fire_thread_.join();
  {
    absl::MutexLock lock(&horizon_mu_);
    horizon_stop_ = true;
  }
  if (horizon_thread_.joinable()) horizon_thread_.join();
  if (dead_scan_thread_.joinable()) dead_scan_thread_.join();
  sweeper_.Stop();
  deliverer_->Stop();
}

void JobService::OnFired(std::vector<timer::TimerEntry> fired) {
  absl::MutexLock lock(&fire_mu_);
  fire_queue_.push_back(std::move(fired));
}

void JobService::FireLoop() {
  while (true) {
    std::vector<timer::TimerEntry> batch;
    {
      absl::MutexLock lock(&fire_mu_);
      fire_mu_.Await(absl::Condition(
          +[](JobService* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->fire_mu_) {
            return s->fire_stop_ || !s->fire_queue_.empty();
          },
          this));
      if (fire_stop_) return;
      batch = std::move(fire_queue_.front());
      fire_queue_.pop_front();
      fire_busy_ = true;
    }
    FireBatch(batch);
    absl::MutexLock lock(&fire_mu_);
    fire_busy_ = false;
  }
}

bool JobService::IdleForTesting() {
  {
    absl::MutexLock lock(&fire_mu_);
    if (fire_busy_ || !fire_queue_.empty()) return false;
  }
  return deliverer_->IdleForTesting();
}

void JobService::FireBatch(const std::vector<timer::TimerEntry>& all) {
  // Lease timers go to the Deliverer; due timers are handled here.
  std::vector<timer::TimerEntry> fired;
  std::vector<uint64_t> lease_tags;
  fired.reserve(all.size());
  for (const timer::TimerEntry& e : all) {
    if (e.tag == kHorizonTag) {
      absl::MutexLock lock(&horizon_mu_);
      horizon_due_ = true;
      continue;
    }
    if (IsLeaseTag(e.tag)) {
      lease_tags.push_back(e.tag);
    } else {
      fired.push_back(e);
    }
  }
  if (!lease_tags.empty()) deliverer_->OnLeaseTimers(std::move(lease_tags));
  // Ready jobs by topic, to count and to kick delivery once per topic.
  absl::flat_hash_map<std::string, int64_t> readied;
  // Entries come in due order; handle one millisecond at a time.
  for (size_t begin = 0; begin < fired.size();) {
    const int64_t ms = fired[begin].due_ms;
    size_t end = begin;
    absl::flat_hash_set<uint64_t> tags;
    std::vector<uint64_t> hashes;
    while (end < fired.size() && fired[end].due_ms == ms) {
      if (tags.insert(fired[end].tag).second) hashes.push_back(fired[end].tag);
      ++end;
    }
    // Under the keys' locks, the due index at `ms` says exactly which of
    // these jobs are still due then (not canceled, not moved).
    KeyLocks::Guard guard(locks_, hashes);
    std::vector<JobKey> due;
    absl::Status scan = store_->ScanDue(
        ms, ms + 1, [&](int64_t, std::string_view topic, std::string_view id) {
          if (tags.contains(KeyHash(AsAbsl(topic), AsAbsl(id)))) {
            due.push_back({std::string(topic), std::string(id)});
          }
          return true;
        });
    if (!scan.ok()) {
      // Try again shortly rather than lose the jobs' timers.
      DELAYD_LOG_ERROR("fire: cannot read the due index at %d: %s", ms,
                       scan.ToString());
      for (size_t i = begin; i < end; ++i) {
        scheduler_.Add(clock_->NowMs() + 100, fired[i].tag);
      }
    }
    for (const JobKey& key : due) {
      if (ledger_.Due(key.topic, key.id)) ++readied[key.topic];
    }
    begin = end;
  }
  for (const auto& [topic, n] : readied) {
    ledger_.CountFired(topic, n);
    deliverer_->Kick(topic);
  }
}

}  // namespace delayd::server
