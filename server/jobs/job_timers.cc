#include "server/jobs/job_timers.h"

namespace delayd::server {

void JobTimers::TrackLocked(uint64_t hash, uint32_t check,
                            timer::TimerHandle handle) {
  auto [it, inserted] = slots_.try_emplace(hash, Slot{handle.raw(), check});
  if (!inserted && it->second.check != check) {
    // Another live key holds this hash: leave this timer untracked.
    shared_.insert(hash);
    return;
  }
  it->second = Slot{handle.raw(), check};
}

void JobTimers::Arm(uint64_t hash, uint32_t check, int64_t due_ms) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(hash);
  if (due_ms > horizon_ms_) {
    // The loader arms it when the horizon gets there.
    if (it != slots_.end() && it->second.check == check) {
      scheduler_->Cancel(timer::TimerHandle::FromRaw(it->second.handle));
      slots_.erase(it);
    }
    return;
  }
  if (it != slots_.end() && it->second.check == check &&
      scheduler_->Reschedule(timer::TimerHandle::FromRaw(it->second.handle),
                             due_ms)) {
    return;
  }
  TrackLocked(hash, check, scheduler_->Add(due_ms, hash));
}

void JobTimers::Disarm(uint64_t hash, uint32_t check) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(hash);
  if (it == slots_.end() || it->second.check != check) return;
  scheduler_->Cancel(timer::TimerHandle::FromRaw(it->second.handle));
  slots_.erase(it);
}

void JobTimers::DisarmBatch(std::span<const Entry> entries) {
  absl::MutexLock lock(&mu_);
  if (slots_.empty()) return;
  // Each lookup is a cache miss in a large table: prefetch ahead.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + kAhead < entries.size()) slots_.prefetch(entries[i + kAhead].hash);
    auto it = slots_.find(entries[i].hash);
    if (it == slots_.end() || it->second.check != entries[i].check) continue;
    scheduler_->Cancel(timer::TimerHandle::FromRaw(it->second.handle));
    slots_.erase(it);
  }
}

std::vector<bool> JobTimers::FiredBatch(std::span<const Entry> entries) {
  std::vector<bool> due(entries.size(), false);
  // The entries with a slot of their own: which entry, and its slot. Their
  // timers go apart, in the same order, as the span Pending reads.
  struct Tracked {
    size_t entry;
    decltype(slots_)::iterator slot;
  };
  std::vector<Tracked> tracked;
  std::vector<timer::TimerHandle> handles;
  tracked.reserve(entries.size());
  handles.reserve(entries.size());
  absl::MutexLock lock(&mu_);
  // Each lookup is a cache miss in a large table: prefetch ahead, as
  // ArmBatch does.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + kAhead < entries.size()) slots_.prefetch(entries[i + kAhead].hash);
    auto it = slots_.find(entries[i].hash);
    if (it == slots_.end()) {
      due[i] = shared_.contains(entries[i].hash);
    } else if (it->second.check != entries[i].check) {
      due[i] = true;
    } else {
      tracked.push_back({i, it});
      handles.push_back(timer::TimerHandle::FromRaw(it->second.handle));
    }
  }
  const std::vector<bool> pending = scheduler_->Pending(handles);
  // (Erasing from the table moves nothing else: the other slots hold.)
  for (size_t k = 0; k < tracked.size(); ++k) {
    if (pending[k]) continue;
    due[tracked[k].entry] = true;
    slots_.erase(tracked[k].slot);
  }
  return due;
}

void JobTimers::ArmBatch(std::span<const Entry> entries) {
  std::vector<timer::TimerEntry> timers;
  timers.reserve(entries.size());
  for (const Entry& e : entries) timers.push_back({e.due_ms, e.hash});
  const std::vector<timer::TimerHandle> handles = scheduler_->AddBatch(timers);
  absl::MutexLock lock(&mu_);
  slots_.reserve(slots_.size() + entries.size());
  // Each insert lands at a random place of a large table: a cache miss
  // (about 30% of a 10M-job recovery). Prefetching a few keys ahead overlaps
  // the misses; the table is reserved, so no rehash moves it meanwhile.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + kAhead < entries.size()) slots_.prefetch(entries[i + kAhead].hash);
    TrackLocked(entries[i].hash, entries[i].check, handles[i]);
  }
}

int64_t JobTimers::horizon() const {
  absl::MutexLock lock(&mu_);
  return horizon_ms_;
}

void JobTimers::SetHorizon(int64_t end_ms) {
  absl::MutexLock lock(&mu_);
  horizon_ms_ = end_ms;
}

void JobTimers::AddHorizonTimers(std::span<const Entry> entries) {
  std::vector<timer::TimerEntry> timers;
  timers.reserve(entries.size());
  for (const Entry& e : entries) timers.push_back({e.due_ms, e.hash});
  const std::vector<timer::TimerHandle> handles = scheduler_->AddBatch(timers);
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < entries.size(); ++i) {
    auto it = slots_.find(entries[i].hash);
    if (it != slots_.end() && it->second.check == entries[i].check) continue;
    TrackLocked(entries[i].hash, entries[i].check, handles[i]);
  }
}

size_t JobTimers::tracked() const {
  absl::MutexLock lock(&mu_);
  return slots_.size();
}

}  // namespace delayd::server
