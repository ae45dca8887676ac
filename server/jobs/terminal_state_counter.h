// TerminalStateCounter: keeps TopicTable's counts of the jobs kept without a
// due entry — DEAD, DONE and CANCELED — right across a restart. Recover reads
// only the due index (the fast path), which holds none of them, so after a
// restart these counts start at zero; once the server serves, Scan() reads
// the job records in the background and adds what it finds. Every
// transition into or out of a counted state goes through Note() (or
// NoteChange()), which also applies it to the counts at once.
//
// Exactness while jobs change: the scan must count each job as it was when
// the counter was created (the counts were zero then). Until the scan ends,
// Note() remembers, per counted state, each key's first transition; at the
// end a touched key counts iff its first transition was -1 (it was in that
// state at the start), whatever the scan read of it. A record the scan
// reads in a counted state is checked under its key lock, after which any
// write the scan saw has been Noted; before it ends, the scan waits for the
// writes under way (KeyLocks::AwaitWritesUnderWay), so that a write it read
// in a state not counted has been Noted too. So the result is exact,
// whatever interleaves.
//
// A scan that fails (a read error) counts nothing yet and keeps tracking:
// run it again. What the failed run found is kept, and the keys it counted
// stay marked, so the next run counts each job once.
//
// (The name predates DONE and CANCELED: DEAD was the first state counted
// this way.)
//
// Thread-safe. REQUIRES of Note's callers: the key's KeyLocks lock held.
#ifndef DELAYD_SERVER_JOBS_TERMINAL_STATE_COUNTER_H_
#define DELAYD_SERVER_JOBS_TERMINAL_STATE_COUNTER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "server/jobs/job_key.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/topic_table.h"
#include "storage/job_store.h"

namespace delayd::server {

class TerminalStateCounter {
 public:
  // `topics` must outlive the counter.
  explicit TerminalStateCounter(TopicTable* topics) : topics_(topics) {}
  TerminalStateCounter(const TerminalStateCounter&) = delete;
  TerminalStateCounter& operator=(const TerminalStateCounter&) = delete;

  // Whether `state` is one this counter keeps: DEAD, DONE or CANCELED.
  static bool Counted(v1::JobState state);

  // A job became DEAD (+1) or stopped being DEAD (-1).
  void Note(absl::string_view topic, absl::string_view id, int delta) {
    Note(v1::JOB_STATE_DEAD, topic, id, delta);
  }
  // A job entered (+1) or left (-1) `state`; ignored when it is not Counted.
  void Note(v1::JobState state, absl::string_view topic, absl::string_view id,
            int delta);
  // A job's record went from state `from` to `to`
  // (JOB_STATE_UNSPECIFIED: no record): Notes both ends when they differ.
  void NoteChange(absl::string_view topic, absl::string_view id,
                  v1::JobState from, v1::JobState to);

  // Scans every job record of `store` and adds the DEAD, DONE and CANCELED
  // ones to the counts; appends the keys of CANCELED records that are not
  // retained to `canceled` (a cancel in flight whose delivery ended with an
  // earlier process). Blocking: run it on a background thread. Returns early
  // (counting nothing, and ending the tracking) when `stop` becomes true.
  // On the store's error it returns that error, counting nothing yet: call
  // it again (with `canceled` emptied), until it returns OK; then never
  // again. One call at a time.
  absl::Status Scan(const storage::JobStore& store, KeyLocks& locks,
                    const std::atomic<bool>& stop,
                    std::vector<JobKey>& canceled);

  // Whether a scan has ended (returned OK): from then on TopicTable knows
  // every topic that has a record.
  bool scanned() const;

 private:
  static constexpr size_t kStates = 3;  // DEAD, DONE, CANCELED
  // The slot of a Counted state.
  static size_t Slot(v1::JobState state);
  void Add(size_t slot, absl::string_view topic, int64_t delta);

  TopicTable* const topics_;
  mutable absl::Mutex mu_;
  // Until a scan has ended, per counted state: each touched key's first
  // delta; 0 marks a key a scan has counted itself (in found_).
  bool tracking_ ABSL_GUARDED_BY(mu_) = true;
  std::array<absl::flat_hash_map<JobKey, int>, kStates> first_
      ABSL_GUARDED_BY(mu_);
  // Per counted state and topic: the keys the scans so far have counted
  // themselves, added to the counts when a scan succeeds.
  std::array<absl::flat_hash_map<std::string, int64_t>, kStates> found_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_TERMINAL_STATE_COUNTER_H_
