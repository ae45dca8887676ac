// Retention: what becomes of a job once it is finished — acked (DONE) or
// canceled (CANCELED) — under --retention. Off (the default), the record is
// deleted at once. On, it is kept in its final state, with the time it
// finished as updated_at, until that time plus the retention
// (JobRecord.expires_at_ms, indexed in the store's `expiry` column family);
// the Sweeper then deletes it. Meanwhile GetJob and ListJobs show it, Cancel
// answers from it (ALREADY_DONE for DONE) and Schedule treats its id as
// taken (see JobService).
//
// A constant value; thread-safe.
#ifndef DELAYD_SERVER_JOBS_RETENTION_H_
#define DELAYD_SERVER_JOBS_RETENTION_H_

#include <cstdint>
#include <utility>

#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "storage/job_record.h"
#include "storage/mutation.h"

namespace delayd::server {

class Retention {
 public:
  // The largest --retention accepted: a year. Retained records cost disk
  // (payload included) for as long as they are kept.
  static constexpr absl::Duration kMax = absl::Hours(24 * 365);

  // REQUIRES: ZeroDuration() <= keep <= kMax (Config checks the flag).
  // Sub-millisecond parts are dropped.
  explicit Retention(absl::Duration keep = absl::ZeroDuration())
      : keep_ms_(absl::ToInt64Milliseconds(keep)) {}

  bool enabled() const { return keep_ms_ > 0; }
  int64_t keep_ms() const { return keep_ms_; }

  // The write that finishes the job stored as `old` in `state` (DONE or
  // CANCELED) at now_ms: off, a delete of it; on, a put of it in `state`,
  // updated_at now_ms, no lease, expires_at_ms now_ms + keep_ms(). Either
  // way the previous index entries are derived from `old`.
  storage::Mutation Finish(const storage::JobRecord& old, v1::JobState state,
                           int64_t now_ms) const {
    if (!enabled()) {
      return storage::Mutation::Delete(old.job().topic(), old.job().id(),
                                       storage::DueIndexEntryOf(old),
                                       storage::ExpiryIndexEntryOf(old));
    }
    storage::JobRecord record = old;
    record.mutable_job()->set_state(state);
    *record.mutable_job()->mutable_updated_at() =
        storage::UnixMsToTimestamp(now_ms);
    record.set_lease_expires_at_ms(0);
    record.set_expires_at_ms(now_ms + keep_ms_);
    return storage::Mutation::Put(std::move(record),
                                  storage::DueIndexEntryOf(old),
                                  storage::ExpiryIndexEntryOf(old));
  }

 private:
  const int64_t keep_ms_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_RETENTION_H_
