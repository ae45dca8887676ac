#include "server/dead_counter.h"

#include <string>
#include <utility>

namespace delayd::server {

void DeadCounter::Note(absl::string_view topic, absl::string_view id,
                       int delta) {
  {
    absl::MutexLock lock(&mu_);
    if (tracking_) {
      first_.try_emplace(JobKey{std::string(topic), std::string(id)}, delta);
    }
  }
  topics_->AddDead(topic, delta);
}

absl::Status DeadCounter::Scan(const storage::JobStore& store, KeyLocks& locks,
                               const std::atomic<bool>& stop,
                               std::vector<JobKey>& canceled) {
  absl::flat_hash_map<std::string, int64_t> found;
  std::vector<std::string> topics;
  absl::Status status = store.ScanTopics([&](std::string_view topic) {
    topics.emplace_back(topic);
    return !stop;
  });
  for (size_t i = 0; status.ok() && !stop && i < topics.size(); ++i) {
    const std::string& topic = topics[i];
    status =
        store.ScanJobs(topic, "", "", [&](const storage::JobRecord& record) {
          const v1::Job& job = record.job();
          if (job.state() == v1::JOB_STATE_CANCELED) {
            canceled.push_back({topic, job.id()});
          } else if (job.state() == v1::JOB_STATE_DEAD) {
            // Any write that made it DEAD has been Noted once we hold the
            // key's lock.
            KeyLocks::Guard guard(locks, KeyHash(topic, job.id()));
            absl::MutexLock lock(&mu_);
            if (first_.try_emplace(JobKey{topic, job.id()}, 0).second) {
              ++found[topic];
            }
          }
          return !stop;
        });
  }
  {
    absl::MutexLock lock(&mu_);
    if (status.ok() && !stop) {
      for (const auto& [key, delta] : first_) {
        if (delta < 0) ++found[key.topic];
      }
    } else {
      found.clear();
    }
    tracking_ = false;
    first_.clear();
  }
  for (const auto& [topic, n] : found) topics_->AddDead(topic, n);
  return status;
}

}  // namespace delayd::server
