// LeaseEndings: how deliveries end without an ack — their lease expired,
// their subscriber's stream ended, or the subscriber nacked — and the
// records canceled in flight whose delivery ended with an earlier process.
//
// An ended delivery is retried (SCHEDULED at the retry time: at once for an
// expiry or a stream end, after the backoff or retry_after for a nack), or
// goes DEAD when it was the last attempt or the nack asked for it. A job
// canceled in flight is finished instead (deleted, or CANCELED under
// --retention). Each batch of endings is one unsynced store write: a
// transition lost in a crash only causes a redelivery. A failed write
// leaves the leases, whose timers try again a second later. Leftover
// CANCELED records that cannot be read or written are kept in a retry list
// and tried again a second later (a kLeftoverRetryTag timer).
//
// Thread-safe; ReleaseLeases, ExpireLeases, DeleteLeftoverCanceled and
// RetryLeftoverCanceled do store I/O and run on the delivery thread
// (WorkLoop tasks), EndDeliveries also on an rpc thread (Nack).
#ifndef DELAYD_SERVER_DELIVERY_LEASE_ENDINGS_H_
#define DELAYD_SERVER_DELIVERY_LEASE_ENDINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/delivery_state.h"
#include "server/delivery/work_loop.h"
#include "storage/job_record.h"

namespace delayd::server {

// The delay before retry number `attempt` (1-based: the attempt that just
// failed) under `retry`: initial_backoff * multiplier^(attempt-1), capped at
// max_backoff; always in [0, max_backoff] (0 when max_backoff is negative),
// whatever the policy holds: initial 0 stays 0 however large the power, a
// power past the double range is the cap, a multiplier below 1 (or NaN) is
// taken as 1. REQUIRES: `retry` is effective (defaults filled in).
int64_t BackoffMs(const v1::RetryPolicy& retry, uint32_t attempt);

// now_ms + delay_ms for a due time or deadline that is stored and shown as
// a Timestamp: saturated at the last millisecond a Timestamp holds, never
// wrapping. REQUIRES: delay_ms >= 0.
int64_t LaterMs(int64_t now_ms, int64_t delay_ms);

class LeaseEndings {
 public:
  // How a delivery ended without an ack.
  struct Ending {
    JobKey key;
    storage::JobRecord record;  // as stored now, its lease overlaid
    int64_t retry_at_ms = 0;    // when to deliver it again
    bool dead_letter = false;   // DEAD now instead
    std::string reason;
    bool nacked = false;
  };

  // Whether `record` is a delivered job: IN_FLIGHT, or CANCELED in flight.
  static bool IsDelivered(const storage::JobRecord& record) {
    const v1::JobState state = record.job().state();
    return state == v1::JOB_STATE_IN_FLIGHT || state == v1::JOB_STATE_CANCELED;
  }

  // All must outlive it.
  LeaseEndings(const DeliveryDeps& deps, DeliveryState* state, WorkLoop* loop)
      : d_(deps), state_(state), loop_(loop) {}
  LeaseEndings(const LeaseEndings&) = delete;
  LeaseEndings& operator=(const LeaseEndings&) = delete;

  // Ends deliveries without an ack, in one store write, and applies the
  // outcome (leases, ledger, ready queue). Returns each job after the
  // change (state CANCELED when deleted). REQUIRES: the keys' locks held;
  // each ending's lease is current.
  absl::StatusOr<std::vector<v1::Job>> EndDeliveries(
      const std::vector<Ending>& endings);

  // Retries at once the leases of `keys` whose delivery ended without an
  // ack: a stream end (`seqs` empty: the leases released by Unsubscribe),
  // or an expiry (`seqs` names the timers that fired, one per key).
  void ReleaseLeases(const std::vector<JobKey>& keys,
                     const std::vector<uint64_t>& seqs,
                     const std::string& reason);
  // Lease timers fired (tags with kLeaseTagBit).
  void ExpireLeases(const std::vector<uint64_t>& tags);
  // Finishes the CANCELED records of `keys` that have no lease and are not
  // retained. Keys whose read or write fails join the retry list, whose
  // timer (kLeftoverRetryTag) is armed a second ahead if it was empty.
  void DeleteLeftoverCanceled(const std::vector<JobKey>& keys);
  // The retry timer fired: DeleteLeftoverCanceled of the retry list.
  void RetryLeftoverCanceled();

 private:
  const DeliveryDeps d_;
  DeliveryState* const state_;
  WorkLoop* const loop_;
  // A leaf but for the Scheduler's lock, taken under it.
  absl::Mutex retry_mu_;
  // Leftover CANCELED records to try again; not empty iff the retry timer
  // is pending.
  std::vector<JobKey> retry_ ABSL_GUARDED_BY(retry_mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_LEASE_ENDINGS_H_
