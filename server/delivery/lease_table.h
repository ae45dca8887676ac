// LeaseTable: the deliveries out, in memory only — key -> {subscriber,
// nonce, attempt, deadline, lease sequence}. A lease's deadline is a timer in
// the shared Scheduler, tagged kLeaseTagBit | a sequence number that is new
// for every (re)armed deadline, so a fired tag names exactly one arming of
// the leases under it; the fire path hands fired lease tags back
// (Deliverer). The leases a dispatch round starts with one deadline share
// one sequence and one timer (AddShared): a herd's million leases are a
// thousand timers, not a million. A lease that is extended leaves its
// sequence for one of its own.
//
// A lease is the job's IN_FLIGHT state: the stored record stays as it was
// before the delivery (only the due entry's attempt mark records it), and
// readers overlay the lease on it (DeliveryState::OverlayLeaseLocked).
//
// Invariants: each lease has exactly one live sequence number, found in the
// sequence index with the lease's key among its keys; a sequence lives
// while a lease has it (its live count), and its timer with it; a lease's
// nonce is never 0 (0 means "never delivered" in the record); its check is
// never 0 (a version 1 ack token's).
//
// Thread-compatible: Deliverer guards it with DeliveryState::mu. Its
// Scheduler calls take the Scheduler's own lock (a leaf).
#ifndef DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_
#define DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

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
    uint64_t seq = 0;       // the lease timer's tag is kLeaseTagBit | seq
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

  // Adds a lease; gives it a sequence number of its own and arms its timer
  // at its deadline. REQUIRES: the key has none.
  void Add(const JobKey& key, Lease lease);
  // Adds leases[i] under keys[i], all under one new sequence number and one
  // timer at their deadline. REQUIRES: no key has a lease, the keys are
  // distinct, and every lease has the same deadline_ms.
  void AddShared(std::span<const JobKey> keys, std::span<const Lease> leases);
  // Removes the key's lease; cancels its sequence's timer when no other
  // lease has that sequence. Returns the lease, or nullopt.
  std::optional<Lease> Remove(const JobKey& key);
  // Moves the lease's timer to `at_ms` (its deadline unchanged unless the
  // caller changed it). A lease that shares its sequence leaves it for a
  // new one of its own, with a timer at `at_ms`; so does one whose timer
  // fired already, so that the expiry under way finds it extended.
  void Rearm(const JobKey& key, Lease& lease, int64_t at_ms);
  // Moves the timer of the lease's sequence to `at_ms`, arming a new one
  // under the same sequence when it fired already (an expiry that must try
  // again). Every lease of the sequence is then expired (or tried again)
  // at `at_ms`: callers re-arm a fired sequence's leases alike.
  void ArmAgain(Lease& lease, int64_t at_ms);

  // The keys whose lease timer has sequence `seq`: each key that had it,
  // some of which may have ended or moved to another sequence since (check
  // the lease's seq). nullptr once no lease has it.
  const std::vector<JobKey>* KeysOf(uint64_t seq) const;

  // A fresh nonce or check, never 0: 64 bits from the OS CSPRNG
  // (getrandom(2), read 4 KiB at a time). Crashes when the OS has none.
  uint64_t NewNonce();

 private:
  // The leases under one sequence number.
  struct Sequence {
    std::vector<JobKey> keys;  // each key that had it
    size_t live = 0;           // leases that have it now
    timer::TimerHandle timer;
  };
  // Takes a lease out of its sequence; drops the sequence, and cancels its
  // timer, when no lease has it any more.
  void LeaveSequence(const Lease& lease);
  // A new sequence of one key, its timer at `at_ms`; sets lease.seq.
  void NewSequence(const JobKey& key, Lease& lease, int64_t at_ms);

  timer::Scheduler* const scheduler_;
  uint64_t next_seq_ = 1;
  std::array<uint64_t, 512> random_;  // from getrandom, used from the end
  size_t random_left_ = 0;
  absl::flat_hash_map<JobKey, Lease> leases_;
  absl::flat_hash_map<uint64_t, Sequence> sequences_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_LEASE_TABLE_H_
