// Makes Debian's absl::Mutex visible to ThreadSanitizer in TSan builds.
//
// Debian's libabsl is not built with -fsanitize=thread, so TSan does not see
// absl::Mutex synchronize and reports every guarded access as a race. In a
// TSan build (-DDELAYD_SANITIZE=thread) every link wraps the Mutex entry
// points our code calls (ld --wrap, see the top CMakeLists.txt): each
// wrapper calls the real function and tells TSan about the acquire or
// release, the way server/timer/tsan_mutex.h does by hand. Around Await the
// mutex is released and re-acquired inside absl, and absl evaluates the
// condition, holding the mutex, on whichever thread: the wrappers hand absl
// a condition that marks an acquire before and a release after the real
// one.
//
// x86-64: a member function takes `this` as its first argument, and
// absl::Duration / absl::Time (trivially copyable, 16 bytes) travel in
// registers, so these free functions match the members' ABI.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

// A condition evaluated under `mu`, on any thread.
struct Marked {
  absl::Mutex* mu;
  const absl::Condition* cond;
};

bool EvalMarked(Marked* m) {
  __tsan_acquire(m->mu);
  const bool holds = m->cond->Eval();
  __tsan_release(m->mu);
  return holds;
}

}  // namespace

extern "C" {

void __real__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu);
bool __real__ZN4absl7debian35Mutex7TryLockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(
    absl::Mutex* mu, const absl::Condition& cond);
bool __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Duration timeout);
bool __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline);

void __wrap__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_acquire(mu);
}

void __wrap__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
}

void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_acquire(mu);
}

void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
}

bool __wrap__ZN4absl7debian35Mutex7TryLockEv(absl::Mutex* mu) {
  const bool locked = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}

void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(
    absl::Mutex* mu, const absl::Condition& cond) {
  Marked marked{mu, &cond};
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(
      mu, absl::Condition(&EvalMarked, &marked));
  __tsan_acquire(mu);
}

bool __wrap__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Duration timeout) {
  Marked marked{mu, &cond};
  __tsan_release(mu);
  const bool holds =
      __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
          mu, absl::Condition(&EvalMarked, &marked), timeout);
  __tsan_acquire(mu);
  return holds;
}

bool __wrap__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) {
  Marked marked{mu, &cond};
  __tsan_release(mu);
  const bool holds =
      __real__ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
          mu, absl::Condition(&EvalMarked, &marked), deadline);
  __tsan_acquire(mu);
  return holds;
}

}  // extern "C"
