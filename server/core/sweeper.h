// Sweeper: deletes the finished jobs that --retention kept (Retention), once
// they expire. It reads the store's expiry index (column family `expiry`,
// ordered by expiry time) from the front, so finding what expired costs
// only what expired — never a scan of the jobs, and nothing in recovery's
// scan of the due index.
//
// One thread of its own (not the timer thread, not an rpc thread) runs
// passes of bounded work: each takes at most kChunk expired entries, locks
// their keys (KeyLocks), re-reads index and records under the locks, and
// deletes them in one unsynced write (a delete lost in a crash is done again
// after the restart: the entry is still there). When a pass finds fewer
// than kChunk, the thread sleeps on the clock until the next entry expires,
// or, with none, for the retention itself (no record written later can
// expire sooner; with retention off and the index empty the thread ends).
//
// Thread-safe. JobService owns it and shares with it the store, clock,
// KeyLocks and JobLedger (counts of DONE and CANCELED drop as it
// deletes).
#ifndef DELAYD_SERVER_CORE_SWEEPER_H_
#define DELAYD_SERVER_CORE_SWEEPER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/retention.h"
#include "server/timer/clock.h"
#include "storage/job_store.h"

namespace delayd::server {

class Sweeper {
 public:
  // Expiry entries handled per pass.
  static constexpr size_t kChunk = 256;

  // What the Sweeper borrows from its owner; all must outlive it.
  struct Deps {
    storage::JobStore* store;
    timer::Clock* clock;
    KeyLocks* locks;
    JobLedger* ledger;
    const Retention* retention;
  };

  explicit Sweeper(const Deps& deps) : d_(deps) {}
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;
  // Stops and joins the thread.
  ~Sweeper() { Stop(); }

  // Starts the thread when there is or can be anything to sweep: retention
  // is on, or the expiry index holds entries (written under an earlier
  // --retention). REQUIRES: not yet started.
  void Start();
  // Stops and joins the thread; idempotent.
  void Stop();

  // One pass at `now_ms`: deletes up to `max` retained records whose expiry
  // is <= now_ms, oldest first. Returns the number of expiry entries taken
  // (deleted, or found gone meanwhile): fewer than `max` when no more have
  // expired. Errors: the store's. REQUIRES: not called concurrently (the
  // thread calls it; tests call it without Start).
  absl::StatusOr<size_t> SweepOnce(int64_t now_ms, size_t max);

  // Records deleted so far.
  int64_t swept() const { return swept_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  // When the thread next has work: the first expiry entry after now_ms; with
  // none, now_ms + the retention, or nullopt when retention is off.
  absl::StatusOr<std::optional<int64_t>> NextWake(int64_t now_ms) const;

  // Constant after construction.
  const Deps d_;

  // Only SweepOnce's caller: where the next pass starts scanning, and when
  // a pass next scans from the start.
  int64_t cursor_ms_ = 0;
  int64_t next_full_scan_ms_ = 0;

  std::atomic<bool> stop_{false};
  std::atomic<int64_t> swept_{0};
  std::unique_ptr<timer::Clock::Waiter> waiter_;  // set by Start
  std::thread thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_SWEEPER_H_
