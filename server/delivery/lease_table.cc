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

void LeaseTable::NewSequence(const JobKey& key, Lease& lease, int64_t at_ms) {
  lease.seq = next_seq_++;
  Sequence& s = sequences_[lease.seq];
  s.keys.push_back(key);
  s.live = 1;
  s.timer = scheduler_->Add(at_ms, kLeaseTagBit | lease.seq);
}

void LeaseTable::LeaveSequence(const Lease& lease) {
  auto it = sequences_.find(lease.seq);
  if (it == sequences_.end() || --it->second.live > 0) return;
  scheduler_->Cancel(it->second.timer);
  sequences_.erase(it);
}

void LeaseTable::Add(const JobKey& key, Lease lease) {
  NewSequence(key, lease, lease.deadline_ms);
  leases_[key] = lease;
}

void LeaseTable::AddShared(std::span<const JobKey> keys,
                           std::span<const Lease> leases) {
  if (keys.empty()) return;
  const uint64_t seq = next_seq_++;
  Sequence& s = sequences_[seq];
  s.keys.assign(keys.begin(), keys.end());
  s.live = keys.size();
  s.timer = scheduler_->Add(leases.front().deadline_ms, kLeaseTagBit | seq);
  leases_.reserve(leases_.size() + keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    (leases_[keys[i]] = leases[i]).seq = seq;
  }
}

std::optional<LeaseTable::Lease> LeaseTable::Remove(const JobKey& key) {
  auto it = leases_.find(key);
  if (it == leases_.end()) return std::nullopt;
  const Lease lease = it->second;
  leases_.erase(it);
  LeaveSequence(lease);
  return lease;
}

void LeaseTable::Rearm(const JobKey& key, Lease& lease, int64_t at_ms) {
  auto it = sequences_.find(lease.seq);
  if (it != sequences_.end() && it->second.live == 1 &&
      scheduler_->Reschedule(it->second.timer, at_ms)) {
    return;
  }
  // Shared, or fired already: its expiry, when it runs, finds a new
  // sequence.
  LeaveSequence(lease);
  NewSequence(key, lease, at_ms);
}

void LeaseTable::ArmAgain(Lease& lease, int64_t at_ms) {
  auto it = sequences_.find(lease.seq);
  if (it == sequences_.end()) return;  // cannot be: the lease has it
  Sequence& s = it->second;
  if (!scheduler_->Reschedule(s.timer, at_ms)) {
    s.timer = scheduler_->Add(at_ms, kLeaseTagBit | lease.seq);
  }
}

const std::vector<JobKey>* LeaseTable::KeysOf(uint64_t seq) const {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? nullptr : &it->second.keys;
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
