#include "server/core/job_service.h"

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "server/base/log.h"
#include "server/jobs/job_key.h"
#include "server/recurring/planner.h"

namespace delayd::server {
namespace {

// The terminal-state scan's back-off after a read error: 100 ms, doubling
// up to 5 s.
constexpr int64_t kScanRetryFirstMs = 100;
constexpr int64_t kScanRetryMaxMs = 5000;

}  // namespace

JobService::JobService(storage::JobStore* store, timer::Clock* clock,
                       const Limits& limits, DeliveryMetrics* metrics,
                       absl::Duration retention)
    : store_(store),
      clock_(clock),
      limits_(limits),
      own_metrics_(metrics == nullptr ? std::make_unique<DeliveryMetrics>()
                                      : nullptr),
      metrics_(metrics == nullptr ? own_metrics_.get() : metrics),
      retention_(retention),
      scheduler_(clock,
                 [this](std::vector<timer::TimerEntry> fired) {
                   fire_.OnFired(std::move(fired));
                 }),
      timers_(&scheduler_),
      terminal_(&topics_),
      ledger_(&topics_, &terminal_, &timers_, &due_, metrics_),
      deliverer_(Deliverer::Deps{store_, clock_, &limits_, &locks_, &ledger_,
                                 &scheduler_, &retention_}),
      horizon_(store_, clock_, &timers_, &scheduler_),
      occurrences_(OccurrenceMaker::Deps{store_, clock_, &locks_, &ledger_,
                                         &deliverer_, &retention_}),
      fire_(FirePath::Deps{store_, clock_, &locks_, &ledger_, &scheduler_,
                           &deliverer_, &horizon_, &occurrences_}),
      writer_(JobWriter::Deps{store_, clock_, &limits_, &locks_, &ledger_,
                              &deliverer_, &retention_}),
      query_(store_, clock_, &limits_, &topics_, &terminal_, &due_, metrics_,
             &deliverer_),
      sweeper_(Sweeper::Deps{store_, clock_, &locks_, &ledger_, &retention_}),
      commits_(store_, storage::Durability::kSync) {
  scheduler_.SetAhead(FirePath::SchedulerAhead());
}

JobService::~JobService() { Stop(); }

absl::StatusOr<JobService::RecoveryStats> JobService::Recover(
    bool recompute_recurring) {
  const absl::Time start = absl::Now();
  const int64_t now_ms = clock_->NowMs();
  // Jobs beyond the memory horizon are counted but get no timer.
  const int64_t horizon_end = horizon_.HorizonEnd(now_ms);
  timers_.SetHorizon(horizon_end);
  RecoveryStats stats;
  // Saturated: the clock may be near INT64_MIN in tests, never wrapping.
  const int64_t cutoff = now_ms < std::numeric_limits<int64_t>::min() +
                                      recurring::kMisfireThresholdMs
                             ? std::numeric_limits<int64_t>::min()
                             : now_ms - recurring::kMisfireThresholdMs;
  absl::StatusOr<int64_t> withdrawn = WithdrawMisfiredAhead(cutoff);
  if (!withdrawn.ok()) return withdrawn.status();
  stats.ahead_withdrawn = *withdrawn;
  std::vector<JobTimers::Entry> entries;
  std::vector<Marked> marked;
  std::vector<JobKey> parents;  // recurring jobs
  std::string last_topic;
  int64_t run = 0;        // jobs of last_topic not yet added to the counts
  int64_t run_bytes = 0;  // and their payload bytes
  // Entries of last_topic in due_second not yet added to the DueBook (the
  // scan is in due order: a topic's entries of one second often follow
  // each other).
  int64_t due_second = 0;
  int64_t due_run = 0;
  absl::Status scan = store_->ScanDueMarked(
      0, std::numeric_limits<int64_t>::max(),
      [&](int64_t due_ms, std::string_view std_topic, std::string_view std_id,
          const storage::DueValue& value) {
        const uint32_t mark = value.mark;
        const absl::string_view topic = AsAbsl(std_topic);
        const absl::string_view id = AsAbsl(std_id);
        if (mark == storage::kRecurringMark) {
          // The key is kept only when it is to be read again.
          ++stats.recurring;
          if (recompute_recurring) {
            parents.push_back({std::string(std_topic), std::string(std_id)});
          }
        } else if (mark > 0 && mark != storage::kAheadMark) {
          // (An occurrence made ahead is a one-shot job not delivered yet.)
          marked.push_back(
              {std::string(std_topic), std::string(std_id), due_ms, mark});
        }
        if (due_ms <= horizon_end) {
          entries.push_back({due_ms, KeyHash(topic, id), KeyCheck(topic, id)});
        }
        ++stats.jobs;
        if (due_ms <= now_ms) ++stats.overdue;
        const int64_t second = DueBook::SecondOf(due_ms);
        if (topic != last_topic || second != due_second) {
          if (due_run > 0) due_.Add(last_topic, due_second * 1000, due_run);
          due_second = second;
          due_run = 0;
        }
        ++due_run;
        if (topic != last_topic) {
          if (run > 0) topics_.AddLive(last_topic, run, run_bytes);
          last_topic = std::string(topic);
          run = 0;
          run_bytes = 0;
        }
        ++run;
        run_bytes += static_cast<int64_t>(value.payload_bytes);
        return true;
      });
  if (!scan.ok()) return scan;
  if (due_run > 0) due_.Add(last_topic, due_second * 1000, due_run);
  if (absl::Status s = RecoverInFlight(marked); !s.ok()) return s;
  stats.in_flight = static_cast<int64_t>(marked.size());
  if (recompute_recurring) {
    absl::StatusOr<int64_t> moved = RecomputeRecurring(parents, entries);
    if (!moved.ok()) return moved.status();
    stats.recurring_moved = *moved;
  }
  if (run > 0) topics_.AddLive(last_topic, run, run_bytes);
  timers_.ArmBatch(entries);
  stats.duration = absl::Now() - start;
  return stats;
}

absl::StatusOr<int64_t> JobService::RewriteChunked(
    size_t n, absl::FunctionRef<storage::JobKeyView(size_t)> key,
    absl::FunctionRef<std::optional<storage::Mutation>(size_t,
                                                       storage::JobRecord&)>
        rewrite) {
  constexpr size_t kChunk = 1024;
  int64_t written = 0;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    std::vector<storage::JobKeyView> keys;
    for (size_t i = begin; i < end; ++i) keys.push_back(key(i));
    absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> stored =
        store_->MultiGet(keys);
    if (!stored.ok()) return stored.status();
    std::vector<storage::Mutation> mutations;
    for (size_t i = begin; i < end; ++i) {
      std::optional<storage::JobRecord>& record = (*stored)[i - begin];
      if (!record.has_value()) continue;
      std::optional<storage::Mutation> m = rewrite(i, *record);
      if (m.has_value()) mutations.push_back(*std::move(m));
    }
    if (absl::Status s = store_->Apply(mutations, storage::Durability::kSync);
        !s.ok()) {
      return s;
    }
    written += static_cast<int64_t>(mutations.size());
  }
  return written;
}

absl::StatusOr<int64_t> JobService::WithdrawMisfiredAhead(int64_t cutoff_ms) {
  std::vector<JobKey> children;
  absl::Status scan = store_->ScanDueMarked(
      0, cutoff_ms,
      [&](int64_t, std::string_view topic, std::string_view id,
          const storage::DueValue& value) {
        if (value.mark == storage::kAheadMark) {
          children.push_back({std::string(topic), std::string(id)});
        }
        return true;
      });
  if (!scan.ok()) return scan;
  constexpr size_t kChunk = 1024;
  int64_t withdrawn = 0;
  for (size_t begin = 0; begin < children.size(); begin += kChunk) {
    const size_t end = std::min(children.size(), begin + kChunk);
    std::vector<storage::JobKeyView> keys;
    for (size_t i = begin; i < end; ++i) {
      keys.push_back({children[i].topic, children[i].id});
    }
    absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> child =
        store_->MultiGet(keys);
    if (!child.ok()) return child.status();
    // Their parents: same topic, the id they name.
    std::vector<storage::JobKeyView> parent_keys;
    for (const std::optional<storage::JobRecord>& c : *child) {
      if (c.has_value() && c->job().has_occurrence_of()) {
        parent_keys.push_back(
            {c->job().topic(), c->job().occurrence_of().id()});
      }
    }
    absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> parents =
        store_->MultiGet(parent_keys);
    if (!parents.ok()) return parents.status();
    std::vector<storage::Mutation> mutations;
    size_t p = 0;
    for (const std::optional<storage::JobRecord>& c : *child) {
      if (!c.has_value() || !c->job().has_occurrence_of()) continue;
      std::optional<storage::JobRecord>& parent = (*parents)[p++];
      if (!parent.has_value()) continue;
      storage::JobRecord rewound = *parent;
      std::optional<storage::Mutation> withdraw =
          WithdrawAhead(rewound, c, std::numeric_limits<int64_t>::min());
      if (!withdraw.has_value()) continue;
      mutations.push_back(*std::move(withdraw));
      mutations.push_back(storage::Mutation::Put(
          std::move(rewound), storage::DueIndexEntryOf(*parent),
          storage::ExpiryIndexEntryOf(*parent)));
    }
    if (absl::Status s = store_->Apply(mutations, storage::Durability::kSync);
        !s.ok()) {
      return s;
    }
    withdrawn += static_cast<int64_t>(mutations.size() / 2);
  }
  if (withdrawn > 0) {
    DELAYD_LOG_INFO(
        "withdrew %d occurrences made ahead whose time passed while the "
        "server was down; their recurring jobs plan them as misfires",
        withdrawn);
  }
  return withdrawn;
}

absl::Status JobService::RecoverInFlight(const std::vector<Marked>& marked) {
  // Synced: the marks are cleared by this write, so it must not be lost
  // while later writes stand.
  return RewriteChunked(
             marked.size(),
             [&](size_t i) -> storage::JobKeyView {
               return {marked[i].topic, marked[i].id};
             },
             [&](size_t i, storage::JobRecord& record)
                 -> std::optional<storage::Mutation> {
               // The index and its records agree (JobStore's invariant); a
               // record that does not is left to the fire path, which skips
               // it.
               if (storage::DueIndexEntryOf(record) != marked[i].due_ms) {
                 return std::nullopt;
               }
               v1::Job& job = *record.mutable_job();
               job.set_state(v1::JOB_STATE_IN_FLIGHT);
               job.set_attempts(std::max(job.attempts(), marked[i].attempt));
               return storage::Mutation::Put(std::move(record),
                                             marked[i].due_ms);
             })
      .status();
}

absl::StatusOr<int64_t> JobService::RecomputeRecurring(
    const std::vector<JobKey>& parents,
    std::vector<JobTimers::Entry>& entries) {
  return RewriteChunked(
      parents.size(),
      [&](size_t i) -> storage::JobKeyView {
        return {parents[i].topic, parents[i].id};
      },
      [&](size_t,
          storage::JobRecord& record) -> std::optional<storage::Mutation> {
        std::optional<storage::JobRecord> next =
            RecomputeNextOccurrence(record);
        if (!next.has_value()) return std::nullopt;
        const int64_t due = *storage::DueIndexEntryOf(*next);
        const v1::Job& job = next->job();
        DELAYD_LOG_INFO(
            "recurring job (%s, %s): next occurrence moved from %d to %d ms "
            "(time zone rules changed)",
            job.topic(), job.id(), *storage::DueIndexEntryOf(record), due);
        if (due <= timers_.horizon()) {
          entries.push_back({due, KeyHash(job.topic(), job.id()),
                             KeyCheck(job.topic(), job.id())});
        }
        // Recovery fails, and the server does not start, if this write does.
        due_.Move(job.topic(), storage::DueIndexEntryOf(record), due);
        return storage::Mutation::Put(*std::move(next),
                                      storage::DueIndexEntryOf(record));
      });
}

void JobService::Start() {
  writer_.StartReadying();
  scheduler_.Start();
  occurrences_.Start();
  fire_.Start();
  deliverer_.Start();
  horizon_.Start();
  sweeper_.Start();
  terminal_scan_waiter_ = clock_->NewWaiter();
  terminal_scan_thread_ = std::thread(&JobService::ScanTerminalStates, this);
}

void JobService::ScanTerminalStates() {
  const absl::Time start = absl::Now();
  std::vector<JobKey> canceled;
  int64_t retry_ms = kScanRetryFirstMs;
  while (true) {
    canceled.clear();
    const absl::Status s =
        terminal_.Scan(*store_, locks_, terminal_scan_stop_, canceled);
    if (terminal_scan_stop_) return;
    if (s.ok()) break;
    DELAYD_LOG_ERROR(
        "counting DEAD, DONE and CANCELED jobs: %s; trying again in %d ms",
        s.ToString(), retry_ms);
    const int64_t now_ms = clock_->NowMs();
    const int64_t until_ms = now_ms > timer::Clock::kNoDeadline - retry_ms
                                 ? timer::Clock::kNoDeadline
                                 : now_ms + retry_ms;
    while (!terminal_scan_stop_ && clock_->NowMs() < until_ms) {
      terminal_scan_waiter_->WaitUntil(until_ms);
    }
    if (terminal_scan_stop_) return;
    retry_ms = std::min(retry_ms * 2, kScanRetryMaxMs);
  }
  if (const absl::Duration took = absl::Now() - start;
      took > absl::Seconds(1) || !canceled.empty()) {
    DELAYD_LOG_INFO(
        "counted DEAD, DONE and CANCELED jobs in %s; %d canceled records "
        "left over",
        absl::FormatDuration(took), canceled.size());
  }
  deliverer_.RemoveLeftoverCanceled(std::move(canceled));
}

void JobService::Stop() {
  terminal_scan_stop_ = true;
  if (terminal_scan_waiter_ != nullptr) terminal_scan_waiter_->Wake();
  scheduler_.Stop();
  fire_.Stop();
  occurrences_.Stop();
  horizon_.Stop();
  if (terminal_scan_thread_.joinable()) terminal_scan_thread_.join();
  sweeper_.Stop();
  deliverer_.Stop();
}

}  // namespace delayd::server
