// What the parts of delivery share: the services they borrow (DeliveryDeps)
// and the in-memory state under one mutex (DeliveryState) — the
// subscribers and the leases, which change together (a lease holds its
// subscriber's credit). Deliverer owns one DeliveryState and hands it to
// Dispatcher, LeaseEndings and AckHandler.
//
// Lock order: KeyLocks, then DeliveryState::mu, then the leaf locks
// (WorkLoop, TopicTable, JobTimers, Scheduler, TerminalStateCounter).
#ifndef DELAYD_SERVER_DELIVERY_DELIVERY_STATE_H_
#define DELAYD_SERVER_DELIVERY_DELIVERY_STATE_H_

#include <span>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/delivery/lease_table.h"
#include "server/delivery/subscriber_set.h"
#include "server/jobs/job_key.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/limits.h"
#include "server/jobs/retention.h"
#include "server/timer/clock.h"
#include "server/timer/scheduler.h"
#include "storage/job_store.h"

namespace delayd::server {

// What delivery borrows from its owner (JobService); all must outlive it.
struct DeliveryDeps {
  storage::JobStore* store;
  timer::Clock* clock;
  const Limits* limits;
  KeyLocks* locks;
  JobLedger* ledger;
  timer::Scheduler* scheduler;  // lease timers share it with due timers
  const Retention* retention;
};

class DeliveryState {
 public:
  // `scheduler` and `topics` must outlive it.
  DeliveryState(timer::Scheduler* scheduler, TopicTable* topics)
      : leases(scheduler), topics_(topics) {}
  DeliveryState(const DeliveryState&) = delete;
  DeliveryState& operator=(const DeliveryState&) = delete;

  absl::Mutex mu;
  SubscriberSet subscribers ABSL_GUARDED_BY(mu);
  LeaseTable leases ABSL_GUARDED_BY(mu);

  // Starts the lease started[i] of keys[i] (a dispatch round's) on the
  // credit Reserve()d for its subscriber; each run of one deadline shares
  // one lease timer (LeaseTable::AddShared). REQUIRES: each key's lock
  // held, the keys distinct; each subscriber known.
  void StartLeasesLocked(std::span<const JobKey> keys,
                         std::span<const LeaseTable::Lease> started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ends the key's lease, if any: cancels its timer (a shared one with the
  // last lease that has it), returns its credit (appending the topic to
  // `kick` when it did) and its in-flight count.
  // REQUIRES: the key's lock held.
  void EndLeaseLocked(const JobKey& key, std::vector<std::string>& kick)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // EndLeaseLocked of each key, with one change of the in-flight count per
  // run of keys of one topic (an Ack's tokens are mostly of one topic).
  // REQUIRES: the keys' locks held.
  void EndLeasesLocked(std::span<const JobKey> keys,
                       std::vector<std::string>& kick)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Shows `record`, as read from the store, as its current lease makes it:
  // IN_FLIGHT, with the lease's attempt, start (updated_at), nonce and
  // deadline. A record without a lease, or canceled in flight (its CANCELED
  // record was written from the overlaid one), is left as stored. Every
  // reader of a record that decides on it or shows it calls this first.
  void OverlayLeaseLocked(storage::JobRecord& record) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);

 private:
  // Ends the key's lease; returns whether it counted as in flight.
  bool EndOneLocked(const JobKey& key, std::vector<std::string>& kick)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  TopicTable* const topics_;
};

// Sorts and dedups `topics` (to kick each once).
void UniqueTopics(std::vector<std::string>& topics);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DELIVERY_STATE_H_
