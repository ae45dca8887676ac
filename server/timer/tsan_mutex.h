// absl::Mutex locking and waiting that ThreadSanitizer can see through.
// Debian's libabsl is not built with -fsanitize=thread, so TSan cannot see
// absl::Mutex synchronize and reports every guarded access as a race. The
// timer module locks and waits through these helpers, which tell TSan about
// each acquire and release — including around conditions, which absl may
// evaluate on whichever thread holds the mutex. Outside TSan builds they
// compile to the plain absl calls. Thread-safe in the way absl::Mutex is.

#ifndef DELAYD_SERVER_TIMER_TSAN_MUTEX_H_
#define DELAYD_SERVER_TIMER_TSAN_MUTEX_H_

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace delayd::timer::internal {

// Marks that what follows happens after every earlier MarkRelease(mu).
inline void MarkAcquire(const absl::Mutex* mu) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  __tsan_acquire(const_cast<absl::Mutex*>(mu));
#else
  static_cast<void>(mu);
#endif
}

// Marks that what precedes happens before every later MarkAcquire(mu).
inline void MarkRelease(const absl::Mutex* mu) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  __tsan_release(const_cast<absl::Mutex*>(mu));
#else
  static_cast<void>(mu);
#endif
}

// Like absl::MutexLock.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
    MarkAcquire(mu_);
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    MarkRelease(mu_);
    mu_->Unlock();
  }

 private:
  absl::Mutex* const mu_;
};

// Like mu->AwaitWithDeadline(absl::Condition(&pred), deadline), for a
// functor `bool operator()() const` that reads state guarded by `mu`; a
// lambda says so with ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_), naming the mutex
// as its owner does. Returns whether `pred` held.
template <typename Pred>
bool AwaitWithDeadline(absl::Mutex* mu, const Pred& pred, absl::Time deadline)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  struct Marked {
    // Not analysed: absl evaluates it with `mu` held, which the analysis
    // cannot see through absl::Condition, nor can it match `mu` here to the
    // name under which `pred` requires that mutex.
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      MarkAcquire(mu);  // absl holds `mu` while it evaluates, on any thread
      const bool holds = (*pred)();
      MarkRelease(mu);
      return holds;
    }
    const absl::Mutex* mu;
    const Pred* pred;
  };
  const Marked marked{mu, &pred};
  MarkRelease(mu);
  const bool holds = mu->AwaitWithDeadline(absl::Condition(&marked), deadline);
  MarkAcquire(mu);
  return holds;
}

template <typename Pred>
void Await(absl::Mutex* mu, const Pred& pred)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  AwaitWithDeadline(mu, pred, absl::InfiniteFuture());
}

template <typename Pred>
bool AwaitWithTimeout(absl::Mutex* mu, const Pred& pred, absl::Duration timeout)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  return AwaitWithDeadline(mu, pred, absl::Now() + timeout);
}

}  // namespace delayd::timer::internal

#endif  // DELAYD_SERVER_TIMER_TSAN_MUTEX_H_
