// Deliverer: the delivery half of the job logic — hands due jobs to the
// subscribers of their topic and keeps the leases of what it handed out.
// JobService owns it and shares with it the store, KeyLocks, TopicTable,
// JobTimers, Scheduler and TerminalStateCounter.
//
// Subscribers: per topic, the open Subscribe streams, each with a credit
// (max_in_flight) and a DeliverySink. Dispatch gives each ready job to the
// next subscriber in round-robin order that has free credit, so subscribers
// share a topic evenly and a slow one (out of credit) holds back nobody.
//
// Leases live in memory only: key -> {subscriber, nonce, attempt, deadline,
// lease timer}. The deadline is a timer in the shared Scheduler, tagged
// kLeaseTagBit | a sequence number; JobService's fire path hands fired lease
// tags to OnLeaseTimers. A lease ends by Ack (the job is deleted, or kept as
// DONE under --retention), Nack (retry later or DEAD), expiry or the end of
// its subscriber's stream (retry at once; DEAD when out of attempts), or a
// REPLACE of the job (superseded). A lease of a job canceled in flight
// stands until one of those, and then the record is finished instead of
// retried: DONE when acked, CANCELED otherwise (kept under --retention,
// deleted without; Retention::Finish).
//
// Restarts: no lease survives one. An IN_FLIGHT record keeps its due entry
// (at a past time), so it fires at once after Recover; Dispatch treats an
// IN_FLIGHT record without a lease as READY and delivers it again as attempt
// attempts+1. Its old ack token is stale.
//
// Durability: fire, lease and ack transitions are written with kNoSync:
// losing one in a crash only causes a redelivery. Redrive (in JobService) is
// synced.
//
// Threads: one delivery thread runs Dispatch, lease expiries and stream-end
// releases (their store I/O); Ack, Nack and ExtendLease run on the caller's
// thread. Subscribe, Unsubscribe, Kick and the JobService hooks never do I/O.
// Thread-safe. Lock order: KeyLocks stripes, then mu_, then work_mu_ and the
// leaf locks of TopicTable, JobTimers and Scheduler.
#ifndef DELAYD_SERVER_DELIVERY_DELIVERER_H_
#define DELAYD_SERVER_DELIVERY_DELIVERER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/delivery_sink.h"
#include "server/jobs/job_key.h"
#include "server/jobs/job_timers.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/limits.h"
#include "server/jobs/retention.h"
#include "server/jobs/terminal_state_counter.h"
#include "server/jobs/topic_table.h"
#include "server/metrics/delivery_metrics.h"
#include "server/timer/clock.h"
#include "server/timer/scheduler.h"
#include "storage/job_store.h"

namespace delayd::server {

// The delay before retry number `attempt` (1-based: the attempt that just
// failed) under `retry`: initial_backoff * multiplier^(attempt-1), capped at
// max_backoff. REQUIRES: `retry` is effective (defaults filled in).
int64_t BackoffMs(const v1::RetryPolicy& retry, uint32_t attempt);

class Deliverer {
 public:
  // What the Deliverer borrows from its owner; all must outlive it.
  struct Deps {
    storage::JobStore* store;
    timer::Clock* clock;
    const Limits* limits;
    KeyLocks* locks;
    TopicTable* topics;
    JobTimers* timers;
    timer::Scheduler* scheduler;
    TerminalStateCounter* dead;
    DeliveryMetrics* metrics;
    const Retention* retention;
  };

  explicit Deliverer(const Deps& deps);
  Deliverer(const Deliverer&) = delete;
  Deliverer& operator=(const Deliverer&) = delete;
  ~Deliverer();

  // Starts / stops the delivery thread. Work queued before Start waits for
  // it; work still queued at Stop is dropped (leases are in memory only: the
  // jobs are delivered again after a restart). Stop is idempotent.
  void Start();
  void Stop();

  // Registers a subscriber. INVALID_ARGUMENT for a bad topic, consumer or
  // max_in_flight; UNAVAILABLE after CloseAll. Returns its id.
  absl::StatusOr<uint64_t> Subscribe(const v1::SubscribeRequest& req,
                                     std::shared_ptr<DeliverySink> sink);
  // The subscriber's stream ended: its unacked deliveries are released and
  // redelivered at once to the others (their attempts count; last_error
  // `reason`). Never blocks on I/O. Unknown ids are ignored.
  void Unsubscribe(uint64_t subscriber, absl::string_view reason);
  // Closes every stream with `status` and refuses new subscribers (server
  // shutdown). Their OnDone calls Unsubscribe as usual.
  void CloseAll(const absl::Status& status);

  // Asks the delivery thread to dispatch `topic` (jobs became ready, or
  // credit freed).
  void Kick(absl::string_view topic);
  // Lease timers fired (tags with kLeaseTagBit); called by the fire path.
  void OnLeaseTimers(std::vector<uint64_t> tags);

  absl::StatusOr<v1::AckResponse> Ack(const v1::AckRequest& req);
  absl::StatusOr<v1::NackResponse> Nack(const v1::NackRequest& req);
  absl::StatusOr<v1::ExtendLeaseResponse> ExtendLease(
      const v1::ExtendLeaseRequest& req);

  // ---- Hooks for JobService. REQUIRES: the key's KeyLocks stripe held. ----

  // Whether a delivery of the job is out (leased).
  bool HasLease(absl::string_view topic, absl::string_view id);
  // The job was canceled in flight (its record is now CANCELED): its
  // delivery stands but no longer counts as in flight. Without a lease (the
  // delivery ended with an earlier process) the record is deleted soon, on
  // the delivery thread.
  void OnCanceledInFlight(absl::string_view topic, absl::string_view id);
  // The job's record was replaced or deleted: any lease of it ends now (its
  // token becomes stale) and its subscriber's credit returns.
  void DropLease(absl::string_view topic, absl::string_view id);

  // Finishes the CANCELED records of `keys` that have no lease and are not
  // retained (left over from a cancel in flight of an earlier process), on
  // the delivery thread.
  void RemoveLeftoverCanceled(std::vector<JobKey> keys);

  // True when the delivery thread has nothing queued and is not working.
  bool IdleForTesting();

 private:
  struct Subscriber {
    uint64_t id;
    std::string topic;
    std::string consumer;
    uint32_t max_in_flight;
    uint32_t in_flight = 0;  // leases held, plus credit reserved by Dispatch
    std::shared_ptr<DeliverySink> sink;
    absl::flat_hash_set<JobKey> leased;
  };
  struct TopicSubscribers {
    std::vector<uint64_t> ids;  // round-robin order
    size_t cursor = 0;
  };
  struct Lease {
    uint64_t subscriber;  // 0: its stream ended, release pending
    uint64_t nonce;
    uint32_t attempt;
    int64_t deadline_ms;
    uint64_t seq;  // the lease timer's tag is kLeaseTagBit | seq
    timer::TimerHandle timer;
    bool canceled = false;  // canceled in flight: not counted as in flight
    // The record's due entry while the lease is current: its fire_at, or
    // none once canceled in flight (a CANCELED record has none). Nothing
    // moves a leased job's fire_at (Reschedule refuses IN_FLIGHT, REPLACE
    // drops the lease), so Ack deletes the record without reading it.
    int64_t due_ms = 0;
  };
  // How a delivery ended without an ack, for EndDeliveries.
  struct Ending {
    JobKey key;
    storage::JobRecord record;  // as stored now
    int64_t retry_at_ms = 0;    // when to deliver it again
    bool dead_letter = false;   // DEAD now instead
    std::string reason;
    bool nacked = false;
  };
  // What EndDeliveries made of a job.
  struct Ended {
    v1::Job job;  // after the change; state CANCELED when deleted
  };

  // ---- deliverer.cc ----
  void Loop();
  void RunTask(std::function<void()> task);
  void Dispatch(const std::string& topic);
  // Reserves up to `max` credits round-robin; one subscriber id per credit.
  std::vector<uint64_t> ReserveLocked(const std::string& topic, size_t max)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnreserveLocked(uint64_t subscriber) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a lease and its timer. REQUIRES: key lock held.
  void AddLeaseLocked(const JobKey& key, Lease lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a lease: cancels its timer, returns its credit and its in-flight
  // count. Returns the topic to kick when credit returned. REQUIRES: key lock.
  void RemoveLeaseLocked(const JobKey& key, std::vector<std::string>& kick)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NewNonceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether `record` is a delivered job: IN_FLIGHT, or CANCELED in flight.
  static bool IsDelivered(const storage::JobRecord& record) {
    const v1::JobState state = record.job().state();
    return state == v1::JOB_STATE_IN_FLIGHT || state == v1::JOB_STATE_CANCELED;
  }

  // ---- deliverer_leases.cc ----
  // Ends deliveries of one topic without an ack, in one store write, and
  // applies the outcome (leases, counts, timers, ready queue, metrics).
  // REQUIRES: the keys' locks held; each ending's lease is current.
  absl::StatusOr<std::vector<Ended>> EndDeliveries(
      const std::vector<Ending>& endings);
  // The leases of `keys` whose delivery ended without an ack (stream end,
  // or expiry when `seqs` names the expired timers): retried at once.
  void ReleaseLeases(const std::vector<JobKey>& keys,
                     const std::vector<uint64_t>& seqs,
                     const std::string& reason);
  void ExpireLeases(const std::vector<uint64_t>& tags);
  void DeleteLeftoverCanceled(const std::vector<JobKey>& keys);

  // Constant after construction.
  const Deps d_;

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_subscriber_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_lease_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, TopicSubscribers> topic_subscribers_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<JobKey, Lease> leases_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, JobKey> lease_keys_ ABSL_GUARDED_BY(mu_);

  // The delivery thread's work: tasks first, then one dispatch round per
  // dirty topic in turn.
  absl::Mutex work_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(work_mu_);
  std::deque<std::string> dirty_order_ ABSL_GUARDED_BY(work_mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(work_mu_);
  bool stop_ ABSL_GUARDED_BY(work_mu_) = false;
  bool busy_ ABSL_GUARDED_BY(work_mu_) = false;
  std::thread thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DELIVERER_H_
