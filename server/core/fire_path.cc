#include "server/core/fire_path.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "server/base/log.h"
#include "server/jobs/job_key.h"

namespace delayd::server {
namespace {

// How long after a failed read of the due index it is tried again.
constexpr int64_t kRetryMs = 100;

}  // namespace

void FirePath::Start() { thread_ = std::thread(&FirePath::Loop, this); }

void FirePath::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void FirePath::OnFired(std::vector<timer::TimerEntry> fired) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fired));
}

bool FirePath::Idle() {
  absl::MutexLock lock(&mu_);
  return !busy_ && queue_.empty();
}

void FirePath::Loop() {
  while (true) {
    std::vector<timer::TimerEntry> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](FirePath* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
            return f->stop_ || !f->queue_.empty();
          },
          this));
      if (stop_) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    FireBatch(batch);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void FirePath::FireBatch(const std::vector<timer::TimerEntry>& all) {
  // Lease timers go to the Deliverer; due timers are handled here.
  std::vector<timer::TimerEntry> fired;
  std::vector<uint64_t> lease_tags;
  fired.reserve(all.size());
  bool retry = false;
  for (const timer::TimerEntry& e : all) {
    if (e.tag == kHorizonTag) {
      d_.horizon->Wake();
      continue;
    }
    if (e.tag == kFireRetryTag) {
      retry = true;
      continue;
    }
    if (e.tag == kLeftoverRetryTag) {
      d_.deliverer->OnLeftoverRetryTimer();
      continue;
    }
    if (IsLeaseTag(e.tag)) {
      lease_tags.push_back(e.tag);
    } else {
      fired.push_back(e);
    }
  }
  if (!lease_tags.empty()) d_.deliverer->OnLeaseTimers(std::move(lease_tags));
  if (retry && !retries_.empty()) {
    // The earlier failures, at their own due times, join this batch.
    fired.insert(fired.end(), retries_.begin(), retries_.end());
    retries_.clear();
    std::stable_sort(
        fired.begin(), fired.end(),
        [](const timer::TimerEntry& a, const timer::TimerEntry& b) {
          return a.due_ms < b.due_ms;
        });
  }
  // Ready jobs by topic, to count and to kick delivery once per topic.
  absl::flat_hash_map<std::string, int64_t> readied;
  // Entries come in due order; handle one millisecond at a time.
  for (size_t begin = 0; begin < fired.size();) {
    const int64_t ms = fired[begin].due_ms;
    size_t end = begin;
    absl::flat_hash_set<uint64_t> tags;
    std::vector<uint64_t> hashes;
    while (end < fired.size() && fired[end].due_ms == ms) {
      if (tags.insert(fired[end].tag).second) hashes.push_back(fired[end].tag);
      ++end;
    }
    // Under the keys' locks, the due index at `ms` says exactly which of
    // these jobs are still due then (not canceled, not moved).
    KeyLocks::Guard guard(*d_.locks, hashes);
    std::vector<JobKey> due;
    absl::Status scan = d_.store->ScanDue(
        ms, ms + 1, [&](int64_t, std::string_view topic, std::string_view id) {
          if (tags.contains(KeyHash(AsAbsl(topic), AsAbsl(id)))) {
            due.push_back({std::string(topic), std::string(id)});
          }
          return true;
        });
    if (!scan.ok()) {
      // Try again shortly, at the same millisecond, rather than lose the
      // jobs' timers.
      DELAYD_LOG_ERROR("fire: cannot read the due index at %d: %s", ms,
                       scan.ToString());
      if (retries_.empty()) {
        d_.scheduler->Add(d_.clock->NowMs() + kRetryMs, kFireRetryTag);
      }
      retries_.insert(retries_.end(), fired.begin() + begin,
                      fired.begin() + end);
    }
    for (const JobKey& key : due) {
      if (d_.ledger->Due(key.topic, key.id)) ++readied[key.topic];
    }
    begin = end;
  }
  for (const auto& [topic, n] : readied) {
    d_.ledger->CountFired(topic, n);
    d_.deliverer->Kick(topic);
  }
}

}  // namespace delayd::server
