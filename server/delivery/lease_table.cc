#include "server/delivery/lease_table.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "server/base/log.h"

namespace delayd::server {

LeaseTable::LeaseTable(timer::Scheduler* scheduler) : scheduler_(scheduler) {}

LeaseTable::Lease* LeaseTable::Find(const JobKey& key) {
  auto it = leases_.find(key);
  return it == leases_.end() ? nullptr : &it->second;
}

const LeaseTable::Lease* LeaseTable::Find(const JobKey& key) const {
  auto it = leases_.find(key);
  return it == leases_.end() ? nullptr : &it->second;
}

bool LeaseTable::Matches(const Lease& lease, uint64_t nonce, uint64_t check,
                         uint32_t attempt) {
  // No early exit on the first differing bit.
  const uint64_t diff =
      (lease.nonce ^ nonce) | (lease.check ^ check) | (lease.attempt ^ attempt);
  return diff == 0;
}

bool LeaseTable::IsCurrent(const JobKey& key, uint64_t nonce, uint64_t check,
                           uint32_t attempt) const {
  auto it = leases_.find(key);
  return it != leases_.end() && Matches(it->second, nonce, check, attempt);
}

void LeaseTable::Add(const JobKey& key, Lease lease) {
  lease.seq = next_seq_++;
  lease.timer = scheduler_->Add(lease.deadline_ms, kLeaseTagBit | lease.seq);
  keys_[lease.seq] = key;
  leases_[key] = lease;
}

std::optional<LeaseTable::Lease> LeaseTable::Remove(const JobKey& key) {
  auto it = leases_.find(key);
  if (it == leases_.end()) return std::nullopt;
  const Lease lease = it->second;
  scheduler_->Cancel(lease.timer);
  keys_.erase(lease.seq);
  leases_.erase(it);
  return lease;
}

void LeaseTable::Rearm(const JobKey& key, Lease& lease, int64_t at_ms) {
  if (scheduler_->Reschedule(lease.timer, at_ms)) return;
  // It fired already; its expiry, when it runs, finds a new sequence.
  keys_.erase(lease.seq);
  lease.seq = next_seq_++;
  keys_[lease.seq] = key;
  lease.timer = scheduler_->Add(at_ms, kLeaseTagBit | lease.seq);
}

void LeaseTable::ArmAgain(Lease& lease, int64_t at_ms) {
  if (scheduler_->Reschedule(lease.timer, at_ms)) return;
  lease.timer = scheduler_->Add(at_ms, kLeaseTagBit | lease.seq);
}

const JobKey* LeaseTable::KeyOf(uint64_t seq) const {
  auto it = keys_.find(seq);
  return it == keys_.end() ? nullptr : &it->second;
}

uint64_t LeaseTable::NewNonce() {
  uint64_t nonce = 0;
  while (nonce == 0) {  // 0 means "never delivered" in the record
    if (random_left_ == 0) {
      auto* bytes = reinterpret_cast<char*>(random_.data());
      size_t got = 0;
      while (got < sizeof(random_)) {
        const ssize_t n = getrandom(bytes + got, sizeof(random_) - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          // No unpredictable tokens without it: a broken host.
          DELAYD_LOG_ERROR("getrandom: %s", std::strerror(errno));
          std::abort();
        }
        got += static_cast<size_t>(n);
      }
      random_left_ = random_.size();
    }
    nonce = random_[--random_left_];
    random_[random_left_] = 0;  // each value is handed out once
  }
  return nonce;
}

}  // namespace delayd::server
