// LeaseTable: the deliveries out, in memory only — key -> {subscriber,
// nonce, attempt, deadline, lease timer}. A lease's deadline is a timer in
// the shared Scheduler, tagged kLeaseTagBit | a sequence number that is new
// for every (re)armed deadline, so a fired tag names exactly one arming of
// one lease; the fire path hands fired lease tags back (Deliverer).
//
// A lease is the job's IN_FLIGHT state: the stored record stays as it was
// before the delivery (only the due entry's attempt mark records it), and
// readers overlay the lease on it (DeliveryState::OverlayLeaseLocked).
//
// Invariants: each lease has exactly one live sequence number, found in the
// sequence index; a lease's nonce is never 0 (0 means "never delivered" in
// the record); its check is never 0 (a version 1 ack token's).
//
// Thread-compatible: Deliverer guards it with DeliveryState::mu. Its
// Scheduler calls take the Scheduler's own lock (a leaf).
#ifndef DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_
#define DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "server/jobs/job_key.h"
#include "server/timer/scheduler.h"

namespace delayd::server {

class LeaseTable {
 public:
  struct Lease {
    uint64_t subscriber = 0;  // 0: its stream ended, release pending
    uint64_t nonce = 0;
    uint32_t attempt = 0;
    // The job's payload size: an ack that deletes the record without
    // reading it takes this much off its topic's live payload bytes.
    uint32_t payload_bytes = 0;
    int64_t deadline_ms = 0;
    uint64_t seq = 0;  // the lease timer's tag is kLeaseTagBit | seq
    timer::TimerHandle timer;
    bool canceled = false;  // canceled in flight: not counted as in flight
    // The record's due entry while the lease is current: its fire_at, or
    // none once canceled in flight (a CANCELED record has none). Nothing
    // moves a leased job's fire_at (Reschedule refuses IN_FLIGHT, REPLACE
    // drops the lease), so Ack deletes the record without reading it. The
    // entry holds the attempt mark of this delivery.
    int64_t due_ms = 0;
    // The ack token's secret half, kept only here (never stored).
    uint64_t check = 0;
    // When the delivery went out (the job's updated_at while in flight).
    int64_t started_ms = 0;
  };

  // `scheduler` must outlive the table.
  explicit LeaseTable(timer::Scheduler* scheduler);
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // nullptr when the key has no lease.
  Lease* Find(const JobKey& key);
  const Lease* Find(const JobKey& key) const;
  bool Contains(const JobKey& key) const { return leases_.contains(key); }
  // Whether `key` has a lease with this nonce, check and attempt (the ack
  // token's). The secret parts are compared in constant time.
  bool IsCurrent(const JobKey& key, uint64_t nonce, uint64_t check,
                 uint32_t attempt) const;
  static bool Matches(const Lease& lease, uint64_t nonce, uint64_t check,
                      uint32_t attempt);

  // Adds a lease; gives it a sequence number and arms its timer at its
  // deadline. REQUIRES: the key has none.
  void Add(const JobKey& key, Lease lease);
  // Removes the key's lease and cancels its timer; returns it, or nullopt.
  std::optional<Lease> Remove(const JobKey& key);
  // Moves the lease's timer to `at_ms` (its deadline unchanged unless the
  // caller changed it); when the timer fired already, arms a new one under
  // a new sequence number, so the expiry under way finds it extended.
  void Rearm(const JobKey& key, Lease& lease, int64_t at_ms);
  // Moves the lease's timer to `at_ms` under the same sequence number,
  // arming a new one when it fired already (an expiry that must try again).
  void ArmAgain(Lease& lease, int64_t at_ms);

  // The key whose lease timer has sequence `seq`; nullptr once it ended or
  // was re-armed under another.
  const JobKey* KeyOf(uint64_t seq) const;

  // A fresh nonce or check, never 0: 64 bits from the OS CSPRNG
  // (getrandom(2), read 4 KiB at a time). Crashes when the OS has none.
  uint64_t NewNonce();

 private:
  timer::Scheduler* const scheduler_;
  uint64_t next_seq_ = 1;
  std::array<uint64_t, 512> random_;  // from getrandom, used from the end
  size_t random_left_ = 0;
  absl::flat_hash_map<JobKey, Lease> leases_;
  absl::flat_hash_map<uint64_t, JobKey> keys_;  // seq -> key
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_
