#include "server/core/sweeper.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/base/log.h"
#include "server/jobs/job_key.h"
#include "storage/job_record.h"

namespace delayd::server {
namespace {

constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();
// After an error, try again this much later.
constexpr int64_t kRetryMs = 1000;
// How often a pass scans the index from its very start rather than from
// where the last pass stopped.
constexpr int64_t kFullScanPeriodMs = 60'000;

}  // namespace

void Sweeper::Start() {
  bool any = d_.retention->enabled();
  if (!any) {
    const absl::Status s =
        d_.store->ScanExpiry(0, kNoBound, [&](int64_t, auto, auto) {
          any = true;
          return false;
        });
    // Cannot tell: run, and let the loop retry.
    if (!s.ok()) any = true;
  }
  if (!any) return;
  waiter_ = d_.clock->NewWaiter();
  thread_ = std::thread(&Sweeper::Loop, this);
}

void Sweeper::Stop() {
  stop_ = true;
  if (waiter_ != nullptr) waiter_->Wake();
  if (thread_.joinable()) thread_.join();
}

void Sweeper::Loop() {
  while (!stop_) {
    const int64_t now_ms = d_.clock->NowMs();
    absl::StatusOr<size_t> taken = SweepOnce(now_ms, kChunk);
    if (taken.ok() && *taken == kChunk) continue;  // more may have expired
    absl::StatusOr<std::optional<int64_t>> next =
        taken.ok() ? NextWake(now_ms) : taken.status();
    if (!next.ok()) {
      DELAYD_LOG_ERROR("sweeper: %s; trying again in %d ms",
                       next.status().ToString(), kRetryMs);
      waiter_->WaitUntil(now_ms + kRetryMs);
      continue;
    }
    if (!next->has_value()) return;  // retention off and nothing left
    waiter_->WaitUntil(**next);
  }
}

absl::StatusOr<std::optional<int64_t>> Sweeper::NextWake(int64_t now_ms) const {
  std::optional<int64_t> next;
  const absl::Status s =
      d_.store->ScanExpiry(now_ms + 1, kNoBound, [&](int64_t ms, auto, auto) {
        next = ms;
        return false;
      });
  if (!s.ok()) return s;
  if (next.has_value()) return next;
  // Anything finished from now on expires no sooner than this.
  if (d_.retention->enabled()) return now_ms + d_.retention->keep_ms();
  return std::nullopt;
}

absl::StatusOr<size_t> Sweeper::SweepOnce(int64_t now_ms, size_t max) {
  struct Entry {
    int64_t expires_ms;
    JobKey key;
  };
  // Start where the last pass stopped: the entries before it are gone, and
  // a scan from 0 would step over their deletion markers again and again
  // while RocksDB has not compacted them away. Now and then start from 0,
  // for an entry that a writer whose clock read lagged added behind.
  if (now_ms >= next_full_scan_ms_) {
    cursor_ms_ = 0;
    next_full_scan_ms_ = now_ms + kFullScanPeriodMs;
  }
  std::vector<Entry> entries;
  absl::flat_hash_map<JobKey, size_t> index_of;  // first entry of each key
  absl::Status s = d_.store->ScanExpiry(
      cursor_ms_, now_ms + 1,
      [&](int64_t ms, std::string_view topic, std::string_view id) {
        if (entries.size() == max) return false;
        JobKey key{std::string(topic), std::string(id)};
        // A key twice (only with a stale entry) waits for the next pass:
        // one write may not name a job twice.
        if (!index_of.try_emplace(key, entries.size()).second) return true;
        entries.push_back({ms, std::move(key)});
        return true;
      });
  if (!s.ok()) return s;
  if (entries.empty()) return 0;
  // Entries of that millisecond may remain; those before it do not.
  cursor_ms_ = entries.back().expires_ms;

  std::vector<uint64_t> hashes;
  std::vector<storage::JobKeyView> views;
  for (const Entry& e : entries) {
    hashes.push_back(KeyHash(e.key.topic, e.key.id));
    views.push_back({e.key.topic, e.key.id});
  }
  KeyLocks::Guard guard(*d_.locks, hashes);
  // Under the keys' locks the index says which entries still stand (a
  // Schedule REPLACE may have taken a record over since the scan).
  std::vector<bool> present(entries.size(), false);
  size_t visited = 0;
  s = d_.store->ScanExpiry(
      entries.front().expires_ms, entries.back().expires_ms + 1,
      [&](int64_t ms, std::string_view topic, std::string_view id) {
        auto it = index_of.find(JobKey{std::string(topic), std::string(id)});
        if (it != index_of.end() && entries[it->second].expires_ms == ms) {
          present[it->second] = true;
        }
        return ++visited < 2 * max;  // bounded, whatever was added meanwhile
      });
  if (!s.ok()) return s;
  absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> stored =
      d_.store->MultiGet(views);
  if (!stored.ok()) return stored.status();

  std::vector<storage::Mutation> mutations;
  std::vector<std::pair<size_t, v1::JobState>> deleted;  // entry, its state
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!present[i]) continue;
    const Entry& e = entries[i];
    const std::optional<storage::JobRecord>& record = (*stored)[i];
    if (record.has_value() &&
        storage::ExpiryIndexEntryOf(*record) == e.expires_ms) {
      deleted.emplace_back(i, record->job().state());
      mutations.push_back(storage::Mutation::Delete(
          e.key.topic, e.key.id, storage::DueIndexEntryOf(*record),
          e.expires_ms));
      continue;
    }
    // An entry no record accounts for: the store's invariant was broken
    // (a bug, never the normal path). Drop the entry, keep the record.
    DELAYD_LOG_WARN("sweeper: stale expiry entry %d for (%s, \"%s\"); removed",
                    e.expires_ms, e.key.topic, e.key.id);
    if (record.has_value()) {
      mutations.push_back(storage::Mutation::Put(
          *record, storage::DueIndexEntryOf(*record), e.expires_ms));
    } else {
      mutations.push_back(storage::Mutation::Delete(
          e.key.topic, e.key.id, std::nullopt, e.expires_ms));
    }
  }
  // Unsynced: a delete lost in a crash is made again after the restart.
  s = d_.store->Apply(mutations, storage::Durability::kNoSync);
  if (!s.ok()) return s;
  for (const auto& [i, state] : deleted) {
    JobLedger::Change change;
    change.topic = entries[i].key.topic;
    change.id = entries[i].key.id;
    change.before = state;  // after: deleted
    d_.ledger->Apply(change);
  }
  swept_.fetch_add(static_cast<int64_t>(deleted.size()),
                   std::memory_order_relaxed);
  return entries.size();
}

}  // namespace delayd::server
