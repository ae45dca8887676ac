#include "server/delivery/delivery_state.h"

#include <algorithm>

#include "storage/job_record.h"

namespace delayd::server {

void DeliveryState::StartLeasesLocked(
    std::span<const JobKey> keys, std::span<const LeaseTable::Lease> started) {
  size_t begin = 0;
  while (begin < keys.size()) {
    size_t end = begin + 1;
    while (end < keys.size() &&
           started[end].deadline_ms == started[begin].deadline_ms) {
      ++end;
    }
    leases.AddShared(keys.subspan(begin, end - begin),
                     started.subspan(begin, end - begin));
    begin = end;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (started[i].subscriber != 0) {
      subscribers.AttachLease(started[i].subscriber, keys[i]);
    }
  }
}

bool DeliveryState::EndOneLocked(const JobKey& key,
                                 std::vector<std::string>& kick) {
  const std::optional<LeaseTable::Lease> lease = leases.Remove(key);
  if (!lease.has_value()) return false;
  if (lease->subscriber != 0 &&
      subscribers.DetachLease(lease->subscriber, key) &&
      (kick.empty() || kick.back() != key.topic)) {
    kick.push_back(key.topic);
  }
  return !lease->canceled;
}

void DeliveryState::EndLeaseLocked(const JobKey& key,
                                   std::vector<std::string>& kick) {
  if (EndOneLocked(key, kick)) topics_->AddInFlight(key.topic, -1);
}

void DeliveryState::EndLeasesLocked(std::span<const JobKey> keys,
                                    std::vector<std::string>& kick) {
  int64_t ended = 0;  // of keys[i - 1]'s topic
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0 && keys[i].topic != keys[i - 1].topic && ended > 0) {
      topics_->AddInFlight(keys[i - 1].topic, -ended);
      ended = 0;
    }
    if (EndOneLocked(keys[i], kick)) ++ended;
  }
  if (ended > 0) topics_->AddInFlight(keys.back().topic, -ended);
}

void DeliveryState::OverlayLeaseLocked(storage::JobRecord& record) const {
  v1::Job& job = *record.mutable_job();
  if (!storage::IsLive(job.state())) return;
  const LeaseTable::Lease* found = leases.Find(JobKey{job.topic(), job.id()});
  if (found == nullptr) return;
  const LeaseTable::Lease& lease = *found;
  job.set_state(v1::JOB_STATE_IN_FLIGHT);
  job.set_attempts(lease.attempt);
  *job.mutable_updated_at() = storage::UnixMsToTimestamp(lease.started_ms);
  record.set_delivery_nonce(lease.nonce);
  record.set_lease_expires_at_ms(lease.deadline_ms);
}

void UniqueTopics(std::vector<std::string>& topics) {
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
}

}  // namespace delayd::server
