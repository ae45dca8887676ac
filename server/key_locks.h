// KeyLocks: striped mutexes that serialize read-modify-write of one job
// (read the record, decide, write, update timers). A job's stripe is chosen
// by its KeyHash, so all keys sharing a hash share a stripe.
//
// Locking many stripes (a batch) takes them in ascending order, which is
// deadlock-free against any other multi-lock and single locks. Thread-safe.
#ifndef DELAYD_SERVER_KEY_LOCKS_H_
#define DELAYD_SERVER_KEY_LOCKS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace delayd::server {

class KeyLocks {
 public:
  static constexpr size_t kStripes = 4096;

  // Holds the stripes of a set of hashes until destroyed.
  class Guard {
   public:
    Guard(KeyLocks& locks, const std::vector<uint64_t>& hashes)
        : locks_(locks) {
      stripes_.reserve(hashes.size());
      for (uint64_t h : hashes) stripes_.push_back(Stripe(h));
      std::sort(stripes_.begin(), stripes_.end());
      stripes_.erase(std::unique(stripes_.begin(), stripes_.end()),
                     stripes_.end());
      for (size_t s : stripes_) locks_.mu_[s].Lock();
    }
    Guard(KeyLocks& locks, uint64_t hash) : Guard(locks, std::vector{hash}) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() {
      for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) {
        locks_.mu_[*it].Unlock();
      }
    }

   private:
    KeyLocks& locks_;
    std::vector<size_t> stripes_;
  };

 private:
  static size_t Stripe(uint64_t hash) {
    return static_cast<size_t>((hash >> 32) ^ hash) % kStripes;
  }

  std::array<absl::Mutex, kStripes> mu_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_KEY_LOCKS_H_
