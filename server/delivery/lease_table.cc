#include "server/delivery/lease_table.h"

#include <utility>

namespace delayd::server {

LeaseTable::LeaseTable(timer::Scheduler* scheduler)
    : scheduler_(scheduler), rng_(std::random_device{}()) {}

LeaseTable::Lease* LeaseTable::Find(const JobKey& key) {
  auto it = leases_.find(key);
  return it == leases_.end() ? nullptr : &it->second;
}

bool LeaseTable::IsCurrent(const JobKey& key, uint64_t nonce,
                           uint32_t attempt) const {
  auto it = leases_.find(key);
  return it != leases_.end() && it->second.nonce == nonce &&
         it->second.attempt == attempt;
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
  uint64_t nonce;
  do {
    nonce = rng_();
  } while (nonce == 0);  // 0 means "never delivered" in the record
  return nonce;
}

}  // namespace delayd::server
