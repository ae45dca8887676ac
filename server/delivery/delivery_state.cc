#include "server/delivery/delivery_state.h"

#include <algorithm>

namespace delayd::server {

void DeliveryState::StartLeaseLocked(const JobKey& key,
                                     const LeaseTable::Lease& lease) {
  leases.Add(key, lease);
  if (lease.subscriber != 0) subscribers.AttachLease(lease.subscriber, key);
}

void DeliveryState::EndLeaseLocked(const JobKey& key,
                                   std::vector<std::string>& kick) {
  const std::optional<LeaseTable::Lease> lease = leases.Remove(key);
  if (!lease.has_value()) return;
  if (!lease->canceled) topics_->AddInFlight(key.topic, -1);
  if (lease->subscriber != 0 &&
      subscribers.DetachLease(lease->subscriber, key)) {
    kick.push_back(key.topic);
  }
}

void UniqueTopics(std::vector<std::string>& topics) {
  std::sort(topics.begin(), topics.end());
  topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
}

}  // namespace delayd::server
