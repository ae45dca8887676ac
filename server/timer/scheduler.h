// Scheduler: the timer thread. Owns a TimingWheel and one thread that sleeps
// until the wheel's next due millisecond, fires what is due by the clock, and
// hands it to a callback in batches. Thread-safe: Add, AddBatch, Cancel and
// Reschedule may be called from any thread; each holds the mutex for one O(1)
// wheel operation (AddBatch: one per entry), and the callback runs without it.
//
// Timing: the thread never ticks when idle. It waits on the clock until the
// wheel's NextWakeMs() — the next due millisecond, or the second before a
// coarse slot is to be opened ahead (TimingWheel::OpenNextSecond, so that a
// second holding a million entries starts firing on time) — or until woken by
// an Add/Reschedule that moves the next due time earlier, or by Stop. On
// waking it reads the clock and advances the wheel to that reading, so an
// entry is never fired before its due time by the clock (a wall clock
// stepping back delays firing; stepping forward fires what became due). With
// SystemClock a step is noticed within its wait bound. After a batch it
// looks at the wheel again before sleeping. The one exception, opt-in, is a
// crowd taken ahead (SetAhead): handed over before its time, marked by its
// due time, for a callee that waits for that time before acting on it.
//
// Cancel has a definite answer: true means the entry has not been and will
// never be handed to the callback; false means it already was (or is being,
// in a batch in flight), was canceled before, or never existed.
//
// Lock hold times: O(1) for Add/Cancel/Reschedule. The timer thread holds the
// mutex while it advances the wheel (~30 ns per entry fired), while it takes a
// crowd ahead (one pass over the crowd's slot, the same order of time as
// firing it), and for each step of opening a second ahead: kOpenStep entries
// of that second's slot (~15-30 ns each once its arrays have grown; a second
// holding a million jobs takes about 30 ms in all). Callers of Add wait
// meanwhile. Between the steps it fires what is due, so opening the next
// second delays the current one's firing by one step, not by the whole open.

#ifndef DELAYD_SERVER_TIMER_SCHEDULER_H_
#define DELAYD_SERVER_TIMER_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/timer/clock.h"
#include "server/timer/timing_wheel.h"

namespace delayd::timer {

class Scheduler {
 public:
  // Receives the entries that fell due, in due order — or, with SetAhead, a
  // crowd taken ahead: entries all due at one later millisecond, which the
  // callee must not act on before then. Runs on the timer thread: it must
  // only hand the batch off (enqueue it for delivery) and return — no I/O, no
  // delivery, no blocking — or firing falls behind. It may call
  // Add/Cancel/Reschedule, but not Stop or the destructor.
  using FireCallback = std::function<void(std::vector<TimerEntry> fired)>;

  // The entries of the next second's slot the thread moves ahead at a time
  // (TimingWheel::OpenNextSecond's budget). Between two steps it fires what
  // fell due, and Add and the others take the lock: a step holds it for
  // 0.2-0.4 ms at most on this box (while the next bank's arrays first
  // grow), not the tens of ms a crowded second takes in one go.
  static constexpr size_t kOpenStep = 512;

  // Crowds taken ahead (off unless set). A millisecond whose slot grows to
  // `min_entries` timers once its second is open (TimingWheel::NextCrowdMs:
  // from a second before it) is a crowd. When the thread has nothing to
  // fire and the first crowd is `lead_ms` away or less, it hands that
  // millisecond's entries accepted by `may_go_early` to the callback, as one
  // batch, ahead of their time; the rest fire as usual. So the work that
  // grows with a crowd (taking it out of the wheel, the hand-off, whatever
  // the callee prepares) is done before its instant. A Cancel or Reschedule
  // of a taken entry returns false, as for one in a batch in flight.
  // Entries added to the millisecond afterwards fire at their time (or make
  // a crowd of their own). may_go_early runs under the scheduler's lock: a
  // pure test of the tag.
  struct Ahead {
    int64_t lead_ms = 0;  // 0: off
    size_t min_entries = 0;
    std::function<bool(uint64_t tag)> may_go_early;
  };

  struct Stats {
    int64_t wakeups = 0;  // timer-thread loop iterations
    int64_t batches = 0;  // callback invocations
    int64_t fired = 0;    // entries handed to the callback
    int64_t ahead = 0;    // of which taken ahead of their due time
  };

  // `clock` must outlive the scheduler. The thread starts with Start().
  Scheduler(Clock* clock, FireCallback on_fire);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // Stops (see Stop) and joins the thread.
  ~Scheduler();

  // Starts the timer thread. Entries added before it (e.g. by recovery) are
  // held until then; those already due fire at once, oldest first.
  // REQUIRES: not yet started.
  void Start();

  // Stops the thread and joins it; idempotent. When it returns the callback
  // is not running and will not run again. Pending entries stay in the wheel
  // unfired. REQUIRES: not called from the callback.
  void Stop();

  // See Ahead. REQUIRES: before Start; lead_ms >= 0, and when lead_ms > 0,
  // min_entries >= 1 and may_go_early set.
  void SetAhead(Ahead ahead);

  // Adds a timer due at `due_ms` (unix ms); one due at or before now fires at
  // once. Never blocks on the callback.
  TimerHandle Add(int64_t due_ms, uint64_t tag);

  // Adds many timers (see TimingWheel::InsertBatch); handles in input order.
  std::vector<TimerHandle> AddBatch(std::span<const TimerEntry> entries);

  // See the class comment for what the result means.
  bool Cancel(TimerHandle handle);

  // Moves a pending timer, keeping its handle; false if it is no longer
  // pending (fired or canceled).
  bool Reschedule(TimerHandle handle, int64_t due_ms);

  // Whether each handle's timer is still pending (neither fired nor
  // canceled), under one lock.
  std::vector<bool> Pending(std::span<const TimerHandle> handles) const;

  // Entries pending in the wheel.
  size_t size() const;
  Stats stats() const;

  // True when the thread has handed every entry due by `ms` to the callback
  // and returned from it: it sleeps, or is about to, until after `ms`. A
  // test that moves a FakeClock to `ms` waits for this before it looks for
  // what the move brings, or for its absence.
  bool SleepsPastForTesting(int64_t ms) const;

 private:
  void Run();
  // Notes that an entry is now due at `due_ms`; true if the thread, asleep
  // until later, must be woken.
  bool NoteDue(int64_t due_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the lead of a crowd at `crowd_ms` begins.
  int64_t LeadStart(int64_t crowd_ms) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an insert: if it made a crowd, notes the start of the first
  // crowd's lead as a due time (NoteDue).
  bool NoteCrowd() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With nothing due: takes the first crowd if its lead has begun, or brings
  // *sleep_until forward to the start of its lead.
  std::vector<TimerEntry> TakeCrowd(int64_t now, int64_t* sleep_until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Clock* const clock_;
  const FireCallback on_fire_;
  const std::unique_ptr<Clock::Waiter> waiter_;

  mutable absl::Mutex mu_;
  TimingWheel wheel_ ABSL_GUARDED_BY(mu_);
  // The time the thread sleeps until (or, while it computes, will next sleep
  // until): an entry due earlier must wake it.
  int64_t sleep_until_ms_ ABSL_GUARDED_BY(mu_) = Clock::kNoDeadline;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  Ahead ahead_ ABSL_GUARDED_BY(mu_);

  // Touched only by Start and Stop, which callers must not race.
  std::thread thread_;
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_SCHEDULER_H_
