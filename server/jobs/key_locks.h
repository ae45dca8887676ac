// KeyLocks: per-job locks that serialize read-modify-write of one job (read
// the record, decide, write, update timers). A job is locked by its KeyHash,
// so keys sharing a 64-bit hash share a lock; any two other jobs never wait
// for each other.
//
// A Guard takes all its hashes at once, or waits until none of them is
// held: batches never deadlock against each other or against single locks,
// and there is no lock order to keep. The held hashes are a set under one
// mutex, held only while a Guard looks its hashes up or gives them back. A
// thread waits only while one of its own jobs is held — not, as with the
// 4096 striped mutexes before, because a batch of acks shared a stripe with
// a batch of dispatched jobs. A waiting batch may be passed by later Guards
// that need none of the hashes it waits for.
//
// A thread must not take a second Guard while it holds one. Thread-safe.
#ifndef DELAYD_SERVER_JOBS_KEY_LOCKS_H_
#define DELAYD_SERVER_JOBS_KEY_LOCKS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace delayd::server {

class KeyLocks {
 public:
  // Holds the locks of a set of hashes until destroyed.
  class Guard {
   public:
    Guard(KeyLocks& locks, std::vector<uint64_t> hashes)
        : locks_(locks), hashes_(std::move(hashes)) {
      std::sort(hashes_.begin(), hashes_.end());
      hashes_.erase(std::unique(hashes_.begin(), hashes_.end()), hashes_.end());
      locks_.Acquire(hashes_);
    }
    Guard(KeyLocks& locks, uint64_t hash) : Guard(locks, std::vector{hash}) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { locks_.Release(hashes_); }

   private:
    friend class KeyLocks;
    struct Adopt {};
    // Takes over `hashes`, sorted, unique and already acquired.
    Guard(KeyLocks& locks, std::vector<uint64_t> hashes, Adopt)
        : locks_(locks), hashes_(std::move(hashes)) {}

    KeyLocks& locks_;
    std::vector<uint64_t> hashes_;  // sorted, unique
  };

  // Takes the lock of `hash` if it is free, without waiting: null when it
  // is held. The Guard may be destroyed on another thread than this one
  // (a write handed to the CommitQueue gives its lock back there).
  std::unique_ptr<Guard> TryLock(uint64_t hash) {
    {
      absl::MutexLock lock(&mu_);
      if (!held_.insert(hash).second) return nullptr;
    }
    return std::unique_ptr<Guard>(
        new Guard(*this, std::vector<uint64_t>{hash}, Guard::Adopt{}));
  }

  // Returns once every hash held at the call has been released at least
  // once: each write under way then has finished. A barrier for a reader
  // that must see the effects of every write it read from the store (the
  // writer holds the key's lock from before its store write until after
  // its bookkeeping). REQUIRES: the caller holds no Guard.
  void AwaitWritesUnderWay() {
    std::vector<uint64_t> held;
    {
      absl::MutexLock lock(&mu_);
      held.assign(held_.begin(), held_.end());
    }
    for (uint64_t h : held) Guard guard(*this, h);
  }

  // How many hashes are held now (tests).
  size_t HeldForTesting() {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }

 private:
  struct Request {
    KeyLocks* locks;
    const std::vector<uint64_t>* hashes;
  };

  // Evaluated by Await with mu_ held (which the analysis cannot see).
  static bool AllFree(Request* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (uint64_t h : *r->hashes) {
      if (r->locks->held_.contains(h)) return false;
    }
    return true;
  }

  void Acquire(const std::vector<uint64_t>& hashes) {
    Request request{this, &hashes};
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&AllFree, &request));
    held_.insert(hashes.begin(), hashes.end());
  }

  void Release(const std::vector<uint64_t>& hashes) {
    absl::MutexLock lock(&mu_);
    for (uint64_t h : hashes) held_.erase(h);
  }

  absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_KEY_LOCKS_H_
