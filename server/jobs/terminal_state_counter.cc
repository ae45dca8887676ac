#include "server/jobs/terminal_state_counter.h"

#include <string>
#include <utility>

#include "storage/job_record.h"

namespace delayd::server {

bool TerminalStateCounter::Counted(v1::JobState state) {
  return state == v1::JOB_STATE_DEAD || state == v1::JOB_STATE_DONE ||
         state == v1::JOB_STATE_CANCELED;
}

size_t TerminalStateCounter::Slot(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_DONE:
      return 1;
    case v1::JOB_STATE_CANCELED:
      return 2;
    default:
      return 0;  // DEAD
  }
}

void TerminalStateCounter::Add(size_t slot, absl::string_view topic,
                               int64_t delta) {
  switch (slot) {
    case 1:
      topics_->AddDone(topic, delta);
      break;
    case 2:
      topics_->AddCanceled(topic, delta);
      break;
    default:
      topics_->AddDead(topic, delta);
      break;
  }
}

void TerminalStateCounter::Note(v1::JobState state, absl::string_view topic,
                                absl::string_view id, int delta) {
  if (!Counted(state)) return;
  const size_t slot = Slot(state);
  {
    absl::MutexLock lock(&mu_);
    if (tracking_) {
      first_[slot].try_emplace(JobKey{std::string(topic), std::string(id)},
                               delta);
    }
  }
  Add(slot, topic, delta);
}

void TerminalStateCounter::NoteChange(absl::string_view topic,
                                      absl::string_view id, v1::JobState from,
                                      v1::JobState to) {
  if (from == to) return;
  Note(from, topic, id, -1);
  Note(to, topic, id, 1);
}

absl::Status TerminalStateCounter::Scan(const storage::JobStore& store,
                                        KeyLocks& locks,
                                        const std::atomic<bool>& stop,
                                        std::vector<JobKey>& canceled) {
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
          if (!Counted(job.state())) return !stop;
          if (job.state() == v1::JOB_STATE_CANCELED &&
              !storage::IsRetained(record)) {
            canceled.push_back({topic, job.id()});
          }
          const size_t slot = Slot(job.state());
          // Any write that put it in this state has been Noted once we hold
          // the key's lock.
          KeyLocks::Guard guard(locks, KeyHash(topic, job.id()));
          absl::MutexLock lock(&mu_);
          // A key already there was Noted first, or counted by this or an
          // earlier, failed run: it is not counted again.
          if (first_[slot].try_emplace(JobKey{topic, job.id()}, 0).second) {
            ++found_[slot][topic];
          }
          return !stop;
        });
  }
  // After an error, keep what was found and tracked for the next run.
  if (!status.ok() && !stop) return status;
  // A write the scan read may not have been Noted yet: its record read in
  // a state not counted (a redrive of a DEAD job, say) took no key lock
  // above. Its writer holds the key's lock until it has Noted, so once
  // every lock held now has been released, all such Notes are in first_.
  if (!stop) locks.AwaitWritesUnderWay();
  std::array<absl::flat_hash_map<std::string, int64_t>, kStates> found;
  {
    absl::MutexLock lock(&mu_);
    if (!stop) {
      found = std::move(found_);
      for (size_t slot = 0; slot < kStates; ++slot) {
        for (const auto& [key, delta] : first_[slot]) {
          if (delta < 0) ++found[slot][key.topic];
        }
      }
    }
    for (size_t slot = 0; slot < kStates; ++slot) {
      first_[slot].clear();
      found_[slot].clear();
    }
    tracking_ = false;
  }
  for (size_t slot = 0; slot < kStates; ++slot) {
    for (const auto& [topic, n] : found[slot]) Add(slot, topic, n);
  }
  return status;
}

bool TerminalStateCounter::scanned() const {
  absl::MutexLock lock(&mu_);
  return !tracking_;
}

}  // namespace delayd::server
