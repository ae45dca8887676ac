// DeadCounter: keeps TopicTable's DEAD counts right across a restart.
// Recover reads only the due index (the fast path), which holds no DEAD jobs,
// so after a restart the DEAD counts start at zero; once the server serves,
// Scan() reads the job records in the background and adds the DEAD jobs it
// finds. Every DEAD transition goes through Note(), which also applies it to
// the counts at once.
//
// Exactness while jobs change: the scan must count each job as it was when
// the counter was created (the counts were zero then). Until the scan ends,
// Note() remembers each key's first transition; at the end a touched key
// counts iff its first transition was -1 (it was DEAD at the start),
// whatever the scan read of it. A record the
// scan reads as DEAD is checked under its key lock, after which any write
// the scan saw has been Noted. So the result is exact, whatever interleaves.
//
// Thread-safe. REQUIRES of Note's callers: the key's KeyLocks stripe held.
#ifndef DELAYD_SERVER_DEAD_COUNTER_H_
#define DELAYD_SERVER_DEAD_COUNTER_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/job_key.h"
#include "server/key_locks.h"
#include "server/topic_table.h"
#include "storage/job_store.h"

namespace delayd::server {

class DeadCounter {
 public:
  // `topics` must outlive the counter.
  explicit DeadCounter(TopicTable* topics) : topics_(topics) {}
  DeadCounter(const DeadCounter&) = delete;
  DeadCounter& operator=(const DeadCounter&) = delete;

  // A job became DEAD (+1) or stopped being DEAD (-1).
  void Note(absl::string_view topic, absl::string_view id, int delta);

  // Scans every job record of `store` and adds the DEAD ones to the counts;
  // appends the keys of CANCELED records to `canceled` (a cancel in flight
  // whose delivery ended with an earlier process). Blocking: run it on a
  // background thread. Returns early (counting nothing) when `stop` becomes
  // true, or with the store's error. Call at most once.
  absl::Status Scan(const storage::JobStore& store, KeyLocks& locks,
                    const std::atomic<bool>& stop,
                    std::vector<JobKey>& canceled);

 private:
  TopicTable* const topics_;
  absl::Mutex mu_;
  // Until a scan has ended: each touched key's first delta; 0 marks a key
  // the scan has counted itself.
  bool tracking_ ABSL_GUARDED_BY(mu_) = true;
  absl::flat_hash_map<JobKey, int> first_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DEAD_COUNTER_H_
