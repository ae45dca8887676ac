// Deliverer: the delivery half of the job logic — hands due jobs to the
// subscribers of their topic and keeps the leases of what it handed out.
// JobService owns it and shares with it the store, KeyLocks, the JobLedger
// (topic counts, timers, terminal counts, metrics) and the Scheduler.
//
// It is the owner and face of delivery's parts:
//   SubscriberSet  the open streams of each topic, their credit, round-robin
//   LeaseTable     the deliveries out: key -> lease, with its timer
//   WorkLoop       the delivery thread: tasks, then one dispatch round per
//                  dirty topic
//   Dispatcher     a dispatch round: ready jobs -> leases -> sinks
//   LeaseEndings   expiry, stream end, nack: retry or DEAD
//   AckHandler     Ack, Nack, ExtendLease
// The subscribers and leases change together, under one mutex
// (DeliveryState).
//
// Leases live in memory only. A lease ends by Ack (the job is deleted, or
// kept as DONE under --retention), Nack (retry later or DEAD), expiry or the
// end of its subscriber's stream (retry at once; DEAD when out of
// attempts), or a REPLACE of the job (superseded). A lease of a job
// canceled in flight stands until one of those, and then the record is
// finished instead of retried: DONE when acked, CANCELED otherwise (kept
// under --retention, deleted without; Retention::Finish).
//
// Lean leases: a delivery writes no record. The stored record stays as it
// was (SCHEDULED), and only its due entry gets an attempt mark
// (Mutation::MarkAttempt: the attempt number of the delivery out). The
// IN_FLIGHT state, attempt, start and deadline live in the lease, and every
// reader overlays them on the stored record (OverlayLeases). ExtendLease
// touches no store. An ack deletes the record and its due entry, mark
// included; a nack, expiry or release rewrites the record (attempts from
// the lease), which clears the mark.
//
// Restarts: no lease survives one. Recover turns each marked due entry into
// an IN_FLIGHT record with the marked attempts (JobService::Recover); its
// due entry is at a past time, so it fires at once. Dispatch treats an
// IN_FLIGHT record without a lease as READY and delivers it again as attempt
// attempts+1 (or DEAD when out of attempts). Its old ack token is stale.
//
// Durability: fire, lease and ack transitions are written with kNoSync:
// they survive kill -9 (the WAL is written through the OS), and losing the
// last unsynced ones in a power loss only causes a redelivery, whose attempt
// number then repeats the lost ones. Redrive (in JobService) is synced.
//
// Threads: the WorkLoop runs Dispatch, lease expiries and stream-end
// releases (their store I/O); Ack, Nack and ExtendLease run on the caller's
// thread. Subscribe, Unsubscribe, Kick and the JobService hooks never do
// I/O. Thread-safe. Lock order: KeyLocks, then DeliveryState::mu, then the
// leaf locks of WorkLoop, TopicTable, JobTimers and Scheduler.
#ifndef DELAYD_SERVER_DELIVERY_DELIVERER_H_
#define DELAYD_SERVER_DELIVERY_DELIVERER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/ack_handler.h"
#include "server/delivery/delivery_sink.h"
#include "server/delivery/delivery_state.h"
#include "server/delivery/dispatcher.h"
#include "server/delivery/lease_endings.h"
#include "server/delivery/work_loop.h"

namespace delayd::server {

class Deliverer {
 public:
  using Deps = DeliveryDeps;

  explicit Deliverer(const Deps& deps);
  Deliverer(const Deliverer&) = delete;
  Deliverer& operator=(const Deliverer&) = delete;
  ~Deliverer();

  // Starts / stops the delivery thread. Work queued before Start waits for
  // it; work still queued at Stop is dropped (leases are in memory only: the
  // jobs are delivered again after a restart). Stop is idempotent.
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }

  // Registers a subscriber. INVALID_ARGUMENT for a bad topic, consumer or
  // max_in_flight; UNAVAILABLE after CloseAll. Returns its id.
  absl::StatusOr<uint64_t> Subscribe(const v1::SubscribeRequest& req,
                                     std::shared_ptr<DeliverySink> sink);
  // The subscriber's stream ended: its unacked deliveries are released and
  // redelivered at once to the others (their attempts count; last_error
  // `reason`). Never blocks on I/O. Unknown ids are ignored.
  void Unsubscribe(uint64_t subscriber, absl::string_view reason);
  // The subscriber's sink wrote deliveries to its stream: the room its
  // unwritten deliveries took is free again (SubscriberSet::Reserve counts
  // them against its credit), so its topic's ready jobs are dispatched.
  // Without it, a job that became ready while the only subscriber's last
  // delivery was still being written waited for the next event of its
  // topic. Unknown ids are ignored.
  void Written(uint64_t subscriber);
  // Closes every stream with `status` and refuses new subscribers (server
  // shutdown). Their OnDone calls Unsubscribe as usual.
  void CloseAll(const absl::Status& status);

  // Asks the delivery thread to dispatch `topic` (jobs became ready, or
  // credit freed).
  void Kick(absl::string_view topic) { loop_.Kick(topic); }
  // Lease timers fired (tags with kLeaseTagBit); called by the fire path.
  void OnLeaseTimers(std::vector<uint64_t> tags);
  // The timer of RemoveLeftoverCanceled's retry fired (kLeftoverRetryTag);
  // called by the fire path.
  void OnLeftoverRetryTimer();

  absl::StatusOr<v1::AckResponse> Ack(const v1::AckRequest& req) {
    return acks_.Ack(req);
  }
  absl::StatusOr<v1::NackResponse> Nack(const v1::NackRequest& req) {
    return acks_.Nack(req);
  }
  absl::StatusOr<v1::ExtendLeaseResponse> ExtendLease(
      const v1::ExtendLeaseRequest& req) {
    return acks_.ExtendLease(req);
  }

  // Shows records read from the store as their leases make them: a job
  // with a delivery out is IN_FLIGHT, with the lease's attempt, start and
  // deadline (DeliveryState::OverlayLeaseLocked). For every reader outside
  // delivery: JobWriter under the keys' locks, which then decides on what
  // it shows; queries without them, a snapshot.
  void OverlayLeases(std::span<std::optional<storage::JobRecord>> records);

  // ---- Hooks for JobService. REQUIRES: the key's KeyLocks held. ----

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
  // the delivery thread. Those it cannot read or write are tried again a
  // second later.
  void RemoveLeftoverCanceled(std::vector<JobKey> keys);

  // Per topic with subscribers, the deliveries handed to their streams and
  // not yet written (held back by a client that does not read).
  absl::flat_hash_map<std::string, size_t> UnwrittenByTopic();

  // True when the delivery thread has nothing queued and is not working.
  bool IdleForTesting() { return loop_.Idle(); }

 private:
  // Constant after construction.
  const Deps d_;

  DeliveryState state_;
  Dispatcher dispatcher_;
  WorkLoop loop_;
  LeaseEndings endings_;
  AckHandler acks_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DELIVERER_H_
