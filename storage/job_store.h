// JobStore: the narrow interface between the server and durable job state.
// Three column-family-like spaces: job records by (topic, id), the due index
// of live jobs by (due_ms, topic, id), and the expiry index of retained
// finished jobs by (expires_at_ms, topic, id) — layout in key_codec.h, record
// format in job_record.proto.
//
// Implementations: RocksDbJobStore (durable), InMemoryJobStore (tests),
// FaultInjectingJobStore (tests; wraps another). All are thread-safe: every
// method may be called concurrently from any thread.
//
// Invariant kept by every implementation, given Apply's preconditions: the
// due index holds exactly one entry per live (SCHEDULED, READY, IN_FLIGHT)
// record, at DueIndexEntryOf(record), and none for other records, except
// for stale entries in the millisecond of a crowd (ScanCrowd); the expiry
// index holds exactly one entry per retained record (IsRetained), at
// ExpiryIndexEntryOf(record), and none for other records.
#ifndef DELAYD_STORAGE_JOB_STORE_H_
#define DELAYD_STORAGE_JOB_STORE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/job_record.h"
#include "storage/key_codec.h"
#include "storage/mutation.h"
#include "storage/store_stats.h"

namespace delayd::storage {

// How durable one Apply must be before it returns.
enum class Durability {
  // The write-ahead log is fsynced before Apply returns OK (unless the store
  // was opened with sync mode "none"). For Schedule, Reschedule, Cancel and
  // everything a client was told is done.
  kSync,
  // Written to the WAL through the OS (survives kill -9, not power loss).
  // For fire, lease and ack transitions, whose loss only causes a
  // redelivery.
  kNoSync,
  // As kSync, for a caller that must not wait (a gRPC thread, under sync
  // mode "none", where a kSync write does not wait for the disk either): a
  // write that would wait out a write stall (RocksDB's slowdown or stop,
  // while compaction catches up) is refused at once with WouldStallError(),
  // having changed nothing and without making the store refuse later
  // writes. The caller then writes where it may wait.
  kSyncNoStall,
};

// The refusal of a kSyncNoStall write that would have waited
// (UNAVAILABLE), and whether `status` is one.
absl::Status WouldStallError();
bool IsWouldStall(const absl::Status& status);

class JobStore {
 public:
  // Visitors return true to continue, false to stop the scan early. Views
  // are valid only during the call. A visitor may call the store; the scan
  // in progress does not see the writes it makes.
  using DueVisitor = absl::FunctionRef<bool(
      int64_t due_ms, std::string_view topic, std::string_view id)>;
  using MarkedDueVisitor =
      absl::FunctionRef<bool(int64_t due_ms, std::string_view topic,
                             std::string_view id, const DueValue& value)>;
  using JobVisitor = absl::FunctionRef<bool(const JobRecord& record)>;
  using TopicVisitor = absl::FunctionRef<bool(std::string_view topic)>;

  virtual ~JobStore() = default;

  // Applies `mutations` atomically: after OK all of them are visible (and
  // durable per `durability`); after an error none is visible to this
  // process. An empty span is OK and writes nothing.
  //
  // REQUIRES: no two mutations name the same job.
  // REQUIRES: each mutation's previous_due_ms is DueIndexEntryOf(the record
  //   stored for its job when Apply runs), and its previous_expiry_ms is
  //   ExpiryIndexEntryOf(it), nullopt when none is stored. The caller has
  //   read that record, and serializes read-modify-Apply per job (no other
  //   Apply for the same job in between). A wrong value leaves a stale index
  //   entry behind. InMemoryJobStore always checks this (and answers
  //   FAILED_PRECONDITION), RocksDbJobStore only when
  //   Options::verify_previous_due is set.
  //
  // Errors: INVALID_ARGUMENT (a mutation is malformed, see
  //   Mutation::Validate, or a job appears twice); UNAVAILABLE (I/O error)
  //   or RESOURCE_EXHAUSTED (disk full) when the store cannot write.
  // After a write error the outcome is unknown but never partial: after a
  //   restart the whole batch is either present or absent (e.g. present
  //   when the WAL append reached the disk but its fsync failed). A write
  //   error may be sticky: the store then refuses every later Apply with
  //   the same code until Resume() succeeds or it is reopened. Reads keep
  //   working.
  virtual absl::Status Apply(std::span<const Mutation> mutations,
                             Durability durability) = 0;

  // The record of (topic, id), or nullopt. Errors: DATA_LOSS (corrupt record,
  // message names the key), FAILED_PRECONDITION (record from a newer
  // format), UNAVAILABLE (read I/O error).
  virtual absl::StatusOr<std::optional<JobRecord>> Get(
      std::string_view topic, std::string_view id) const = 0;

  // Get for many keys at once, results in `keys` order; fails as a whole
  // with the first error (which names its key).
  virtual absl::StatusOr<std::vector<std::optional<JobRecord>>> MultiGet(
      std::span<const JobKeyView> keys) const = 0;

  // Visits the due entries with from_ms <= due_ms < to_ms (both clamped to
  // >= 0; pass INT64_MAX for "no bound"), in (due_ms, topic, id) order.
  // Reads keys only, bypassing the block cache. Errors: DATA_LOSS (a
  // malformed due key, named), UNAVAILABLE.
  virtual absl::Status ScanDue(int64_t from_ms, int64_t to_ms,
                               DueVisitor visitor) const = 0;
  // The fire path's reads. They read the same blocks again soon (a chunk's
  // jobs are re-read under their locks right after the scan that found
  // them), so unlike the scans above and below they keep what they read in
  // the block cache.
  //
  // As ScanDue(ms, ms + 1): the due entries of one millisecond. Not const:
  // RocksDbJobStore may finish a crowd's count here (ScanCrowd).
  virtual absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) = 0;
  // As ScanFireMillisecond, for a crowd: `ms` holds many jobs (a herd) and
  // the fire path is about to fire them, at or after `ms`. The store may
  // then make `ms` a crowd: until every job due at `ms` has left it, Apply
  // leaves the due entries it removes from `ms` where they are, and deletes
  // them all at once, by range, when the last one goes (RocksDbJobStore).
  // Meanwhile the due index at `ms` may hold entries of jobs no longer due
  // there (stale), which only the fire path, whose timers name the jobs it
  // fires, reads. A crash leaves them for the next Open to clear. The
  // default is ScanFireMillisecond. REQUIRES: the clock has reached `ms`
  // (no other reader of the due index looks at a time past).
  virtual absl::Status ScanCrowd(int64_t ms, DueVisitor visitor) {
    return ScanFireMillisecond(ms, visitor);
  }
  // As ScanDueMarked, from the entry (from_ms, from_topic, from_id) on,
  // itself included if present: a scan that goes on where another stopped,
  // or that reads again a range another scan saw.
  virtual absl::Status ScanDueFrom(int64_t from_ms, std::string_view from_topic,
                                   std::string_view from_id, int64_t to_ms,
                                   MarkedDueVisitor visitor) const = 0;

  // As ScanDue, with each entry's value (key_codec.h): its mark (0: none;
  // an attempt; kRecurringMark: a recurring job's; kAheadMark) and its
  // job's payload size: recovery's scan. Errors also DATA_LOSS for a
  // malformed value (named).
  virtual absl::Status ScanDueMarked(int64_t from_ms, int64_t to_ms,
                                     MarkedDueVisitor visitor) const = 0;

  // Visits the expiry entries with from_ms <= expires_at_ms < to_ms (both
  // clamped to >= 0), in (expires_at_ms, topic, id) order, like ScanDue.
  // The visitor's first argument is the expiry time.
  virtual absl::Status ScanExpiry(int64_t from_ms, int64_t to_ms,
                                  DueVisitor visitor) const = 0;

  // Visits the records of `topic` whose id starts with id_prefix (empty: the
  // whole topic) and is greater than start_after_id (empty: from the first
  // id; stored ids are never empty), in id byte order. Errors as for Get: a
  // corrupt record stops the scan with an error naming its key.
  virtual absl::Status ScanJobs(std::string_view topic,
                                std::string_view id_prefix,
                                std::string_view start_after_id,
                                JobVisitor visitor) const = 0;

  // Visits every topic that has at least one record, in byte order. Costs
  // one seek per topic.
  virtual absl::Status ScanTopics(TopicVisitor visitor) const = 0;

  // Lifts a sticky write error after the cause is fixed (e.g. space was
  // freed). OK when writes are accepted again (also when there was no
  // error); otherwise the store must be reopened.
  virtual absl::Status Resume() = 0;

  virtual StoreStats stats() const = 0;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_JOB_STORE_H_
