#include "server/core/fire_path.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "server/base/huge_page_allocator.h"
#include "server/base/log.h"
#include "server/base/stage_cpu.h"
#include "server/jobs/job_key.h"
#include "storage/key_codec.h"

namespace delayd::server {
namespace {

// How long after a failed read of the due index it is tried again.
constexpr int64_t kRetryMs = 100;

}  // namespace

timer::Scheduler::Ahead FirePath::SchedulerAhead(int64_t lead_ms,
                                                 size_t min_jobs) {
  // Job timers only: a lease timer taken early would end a lease before the
  // deadline its subscriber was given; the fire path's own tags are rare.
  return {lead_ms, min_jobs, IsDueTag};
}

void FirePath::Start() { thread_ = std::thread(&FirePath::Loop, this); }

void FirePath::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  waiter_->Wake();
  if (thread_.joinable()) thread_.join();
}

void FirePath::OnFired(std::vector<timer::TimerEntry> fired) {
  bool wake;
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fired));
    wake = awaiting_;
  }
  if (wake) waiter_->Wake();
}

std::optional<std::vector<timer::TimerEntry>> FirePath::PopDueLocked(
    int64_t now) {
  // Batches are in due order: one is due when its last entry is.
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->empty() || it->back().due_ms <= now) {
      std::vector<timer::TimerEntry> batch = std::move(*it);
      queue_.erase(it);
      return batch;
    }
  }
  return std::nullopt;
}

bool FirePath::AwaitDue(int64_t ms) {
  if (d_.clock->NowMs() >= ms) return true;
  while (true) {
    std::optional<std::vector<timer::TimerEntry>> batch;
    {
      absl::MutexLock lock(&mu_);
      awaiting_ = false;
      if (stop_) return false;
      const int64_t now = d_.clock->NowMs();
      if (now >= ms) return true;
      if (!nested_) batch = PopDueLocked(now);
      if (!batch) awaiting_ = true;
    }
    if (batch) {
      nested_ = true;
      FireBatch(*batch);
      nested_ = false;
      continue;
    }
    // Returns at once if OnFired or Stop woke it since the lock was
    // released.
    waiter_->WaitUntil(ms);
  }
}

bool FirePath::Idle() {
  absl::MutexLock lock(&mu_);
  return !busy_ && queue_.empty();
}

bool FirePath::SettledForTesting() {
  absl::MutexLock lock(&mu_);
  const int64_t now = d_.clock->NowMs();
  for (const std::vector<timer::TimerEntry>& batch : queue_) {
    if (batch.empty() || batch.front().due_ms <= now) return false;
  }
  return !busy_ || awaiting_;
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
  // Entries come in due order; handle one millisecond at a time.
  for (size_t begin = 0; begin < fired.size();) {
    const int64_t ms = fired[begin].due_ms;
    size_t end = begin;
    while (end < fired.size() && fired[end].due_ms == ms) ++end;
    FireMillisecond(ms, std::span(fired).subspan(begin, end - begin));
    begin = end;
  }
}

void FirePath::FireMillisecond(int64_t ms,
                               std::span<const timer::TimerEntry> entries) {
  const stage_cpu::Scope stage(stage_cpu::Stage::kFire);
  stage_cpu::Splitter tags_stage;
  // A crowd's tags, a million in a herd, probed at random: on huge pages.
  HugePageHashSet<uint64_t> tags;
  tags.reserve(entries.size());
  for (const timer::TimerEntry& e : entries) tags.insert(e.tag);
  tags_stage.Mark(stage_cpu::Stage::kFireTags);
  // Tags whose jobs have been dealt with (readied, or found not due); made
  // a set only when a chunk fails.
  std::vector<uint64_t> handled;
  std::vector<JobKey> chunk;  // in due-index order
  chunk.reserve(std::min(tags.size(), kChunk));
  absl::Status failed;
  // Readies the chunk's jobs that are still due at `ms`, under their locks,
  // and kicks delivery: the first chunk's jobs go out while later ones are
  // read.
  auto fire_chunk = [&]() -> absl::Status {
    // A crowd taken ahead is prepared up to here before its time.
    if (!AwaitDue(ms)) return absl::CancelledError("fire path stopping");
    stage_cpu::Splitter stages;
    std::vector<uint64_t> hashes;
    hashes.reserve(chunk.size());
    for (const JobKey& key : chunk)
      hashes.push_back(KeyHash(key.topic, key.id));
    const absl::flat_hash_set<uint64_t> mine(hashes.begin(), hashes.end());
    KeyLocks::Guard guard(*d_.locks, hashes);
    stages.Mark(stage_cpu::Stage::kFireLock);
    // Read under the locks, the chunk's range of the due index says which
    // of its jobs are still due then (not canceled, not moved); in a
    // crowd's millisecond some entries may be stale, and the ledger tells
    // those by their timers (DueBatch).
    std::vector<JobKey> due;
    std::vector<JobKey> parents;  // recurring jobs (marked entries)
    const JobKey& last = chunk.back();
    absl::Status scan = d_.store->ScanDueFrom(
        ms, chunk.front().topic, chunk.front().id, storage::EndOfMs(ms),
        [&](int64_t, std::string_view topic, std::string_view id,
            const storage::DueValue& value) {
          // Key order: topics hold no '\0', so (topic, id) pairs compare
          // as the encoded keys do.
          if (std::pair(topic, id) >
              std::pair<std::string_view, std::string_view>(last.topic,
                                                            last.id)) {
            return false;
          }
          if (mine.contains(KeyHash(AsAbsl(topic), AsAbsl(id)))) {
            (value.mark == storage::kRecurringMark ? parents : due)
                .push_back({std::string(topic), std::string(id)});
          }
          return true;
        });
    stages.Mark(stage_cpu::Stage::kFireRescan);
    if (!scan.ok()) return scan;
    if (!parents.empty()) d_.occurrences->Enqueue(ms, std::move(parents));
    // A run of one topic's jobs (the index is in topic order within the
    // millisecond) becomes ready in one batch.
    std::vector<absl::string_view> ids;
    for (size_t begin = 0; begin < due.size();) {
      const std::string& topic = due[begin].topic;
      ids.clear();
      size_t end = begin;
      for (; end < due.size() && due[end].topic == topic; ++end) {
        ids.push_back(due[end].id);
      }
      const int64_t n = d_.ledger->DueBatch(topic, ids);
      if (n > 0) {
        d_.ledger->CountFired(topic, n);
        d_.deliverer->Kick(topic);
      }
      begin = end;
    }
    handled.insert(handled.end(), hashes.begin(), hashes.end());
    stages.Mark(stage_cpu::Stage::kFireReady);
    return absl::OkStatus();
  };
  // Which jobs the fired tags name: the due index at `ms`, read without
  // locks, in chunks. A crowd's, from its instant on (ScanCrowd).
  const auto visit = [&](int64_t, std::string_view topic, std::string_view id) {
    if (!tags.contains(KeyHash(AsAbsl(topic), AsAbsl(id)))) return true;
    chunk.push_back({std::string(topic), std::string(id)});
    if (chunk.size() < (handled.empty() ? kFirstChunk : kChunk)) {
      return true;
    }
    failed = fire_chunk();
    chunk.clear();
    return failed.ok();
  };
  absl::Status scan;
  if (entries.size() >= kCrowdMinJobs) {
    if (!AwaitDue(ms)) return;
    scan = d_.store->ScanCrowd(ms, visit);
  } else {
    scan = d_.store->ScanFireMillisecond(ms, visit);
  }
  if (failed.ok()) failed = scan;
  if (failed.ok() && !chunk.empty()) failed = fire_chunk();
  if (failed.ok() || absl::IsCancelled(failed)) return;
  // Try again shortly, at the same millisecond, rather than lose the jobs'
  // timers: the entries not dealt with wait in the retry list.
  DELAYD_LOG_ERROR("fire: cannot read the due index at %d: %s", ms,
                   failed.ToString());
  if (retries_.empty()) {
    d_.scheduler->Add(d_.clock->NowMs() + kRetryMs, kFireRetryTag);
  }
  const absl::flat_hash_set<uint64_t> done(handled.begin(), handled.end());
  for (const timer::TimerEntry& e : entries) {
    if (!done.contains(e.tag)) retries_.push_back(e);
  }
}

}  // namespace delayd::server
