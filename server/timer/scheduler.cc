#include "server/timer/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "server/timer/tsan_mutex.h"

namespace delayd::timer {

Scheduler::Scheduler(Clock* clock, FireCallback on_fire)
    : clock_(clock),
      on_fire_(std::move(on_fire)),
      waiter_(clock->NewWaiter()),
      wheel_(clock->NowMs()) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  {
    internal::MutexLock lock(&mu_);
    if (started_) {
      std::fprintf(stderr, "delayd::timer::Scheduler: started twice\n");
      std::abort();
    }
    started_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void Scheduler::Stop() {
  {
    internal::MutexLock lock(&mu_);
    stopping_ = true;
  }
  waiter_->Wake();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::NoteDue(int64_t due_ms) {
  if (due_ms >= sleep_until_ms_) return false;
  sleep_until_ms_ = due_ms;
  return true;
}

void Scheduler::SetAhead(Ahead ahead) {
  internal::MutexLock lock(&mu_);
  if (started_ || ahead.lead_ms < 0 ||
      (ahead.lead_ms > 0 && (ahead.min_entries == 0 || !ahead.may_go_early))) {
    std::fprintf(stderr, "delayd::timer::Scheduler: bad SetAhead\n");
    std::abort();
  }
  wheel_.SetCrowdSize(ahead.lead_ms > 0 ? ahead.min_entries : 0);
  ahead_ = std::move(ahead);
}

int64_t Scheduler::LeadStart(int64_t crowd_ms) const {
  // Saturated: the crowd is within two seconds of now, but tests run clocks
  // near the ends of int64.
  return crowd_ms < std::numeric_limits<int64_t>::min() + ahead_.lead_ms
             ? std::numeric_limits<int64_t>::min()
             : crowd_ms - ahead_.lead_ms;
}

bool Scheduler::NoteCrowd() {
  if (!wheel_.TakeCrowdFormed()) return false;
  const std::optional<int64_t> crowd = wheel_.NextCrowdMs();
  return crowd && NoteDue(LeadStart(*crowd));
}

std::vector<TimerEntry> Scheduler::TakeCrowd(int64_t now,
                                             int64_t* sleep_until) {
  wheel_.TakeCrowdFormed();  // seen here, whatever formed it
  if (ahead_.lead_ms == 0) return {};
  const std::optional<int64_t> crowd = wheel_.NextCrowdMs();
  if (!crowd) return {};
  const int64_t lead_start = LeadStart(*crowd);
  if (now < lead_start) {
    *sleep_until = std::min(*sleep_until, lead_start);
    return {};
  }
  return wheel_.TakeAhead(*crowd, ahead_.may_go_early);
}

TimerHandle Scheduler::Add(int64_t due_ms, uint64_t tag) {
  TimerHandle handle;
  bool wake;
  {
    internal::MutexLock lock(&mu_);
    handle = wheel_.Insert(due_ms, tag);
    wake = NoteDue(due_ms);
    wake = NoteCrowd() || wake;
  }
  if (wake) waiter_->Wake();
  return handle;
}

std::vector<TimerHandle> Scheduler::AddBatch(
    std::span<const TimerEntry> entries) {
  if (entries.empty()) return {};
  std::vector<TimerHandle> handles;
  bool wake;
  {
    internal::MutexLock lock(&mu_);
    handles = wheel_.InsertBatch(entries);
    const auto earliest =
        std::min_element(entries.begin(), entries.end(),
                         [](const TimerEntry& a, const TimerEntry& b) {
                           return a.due_ms < b.due_ms;
                         });
    wake = NoteDue(earliest->due_ms);
    wake = NoteCrowd() || wake;
  }
  if (wake) waiter_->Wake();
  return handles;
}

bool Scheduler::Cancel(TimerHandle handle) {
  internal::MutexLock lock(&mu_);
  return wheel_.Cancel(handle);
}

bool Scheduler::Reschedule(TimerHandle handle, int64_t due_ms) {
  bool wake;
  {
    internal::MutexLock lock(&mu_);
    if (!wheel_.Reschedule(handle, due_ms)) return false;
    wake = NoteDue(due_ms);
    wake = NoteCrowd() || wake;
  }
  if (wake) waiter_->Wake();
  return true;
}

std::vector<bool> Scheduler::Pending(
    std::span<const TimerHandle> handles) const {
  std::vector<bool> pending(handles.size());
  internal::MutexLock lock(&mu_);
  for (size_t i = 0; i < handles.size(); ++i) {
    pending[i] = wheel_.Pending(handles[i]);
  }
  return pending;
}

size_t Scheduler::size() const {
  internal::MutexLock lock(&mu_);
  return wheel_.size();
}

Scheduler::Stats Scheduler::stats() const {
  internal::MutexLock lock(&mu_);
  return stats_;
}

bool Scheduler::SleepsPastForTesting(int64_t ms) const {
  internal::MutexLock lock(&mu_);
  // The minimum while the callback runs or the thread yields; lowered by an
  // entry due earlier (NoteDue).
  return sleep_until_ms_ > ms;
}

void Scheduler::Run() {
  while (true) {
    // Read before taking the lock: the reading is no later than the moment
    // of firing, so nothing fires early by this clock.
    const int64_t now = clock_->NowMs();
    std::vector<TimerEntry> fired;
    int64_t sleep_until = std::numeric_limits<int64_t>::min();
    {
      internal::MutexLock lock(&mu_);
      if (stopping_) return;
      ++stats_.wakeups;
      fired = wheel_.Advance(now);
      if (fired.empty()) {
        // Idle: open the next second's slot now, so that entering it later
        // costs nothing; take a crowd whose lead has begun (SetAhead), or
        // sleep until something is due, to open, or to take.
        wheel_.OpenNextSecond(kOpenStep);
        // A second still being opened: come back at once, letting the
        // others have the lock in between.
        sleep_until = wheel_.NextSecondOpen()
                          ? wheel_.NextWakeMs().value_or(Clock::kNoDeadline)
                          : std::numeric_limits<int64_t>::min();
        fired = TakeCrowd(now, &sleep_until);
        stats_.ahead += static_cast<int64_t>(fired.size());
      }
      if (!fired.empty()) {
        ++stats_.batches;
        stats_.fired += static_cast<int64_t>(fired.size());
        sleep_until = std::numeric_limits<int64_t>::min();
      }
      // While the callback runs, sleep_until_ms_ is the minimum: an Add need
      // not wake a thread that will look at the wheel again anyway.
      sleep_until_ms_ = sleep_until;
    }
    if (!fired.empty()) {
      on_fire_(std::move(fired));
      continue;
    }
    // The next second is still being opened: the next step, after any
    // thread waiting for this core has run. A thread this one has just woken
    // (the fire path's, with a batch) is often queued behind it on this
    // core; without the yield it waits for the whole open (milliseconds).
    if (sleep_until == std::numeric_limits<int64_t>::min()) {
      std::this_thread::yield();
      continue;
    }
    // Returns at once if an Add, Reschedule or Stop woke us since the lock
    // was released.
    waiter_->WaitUntil(sleep_until);
  }
}

}  // namespace delayd::timer
