// RocksDbJobStore: the durable JobStore, on one RocksDB database with the
// column families `jobs`, `due` and `expiry` (layout: key_codec.h; record
// format and versioning: job_record.proto). Every Apply is one WriteBatch
// over the column families, hence one WAL record: atomic across a crash.
//
// Owns the database; the destructor closes it (see Close). Thread-safe:
// every method may be called concurrently. Concurrent synced Applies share
// WAL fsyncs: RocksDB groups writers queued behind the leader into one WAL
// write and one fsync (group commit).
//
// Write errors are sticky, as in LevelDB: once a write fails (I/O error,
// disk full), RocksDB itself stops accepting writes (background error, the
// WAL may end in a torn record), and this store refuses every later Apply
// with the first error's code until Resume() succeeds or the store is
// reopened. Reads keep working and see only what was written before the
// failure. Resume() succeeds when RocksDB can recover on its own: after a
// full disk (RESOURCE_EXHAUSTED) RocksDB retries in the background and,
// once space is back, flushes its memtables to a fresh WAL; Resume()
// answers UNAVAILABLE ("busy") until then, so the server may call it every
// few seconds while writes are refused. After a WAL I/O error (UNAVAILABLE)
// Resume() keeps failing: the store must be reopened, which replays the
// WAL up to its last whole record (tests: rocksdb_fault_test.cc).
//
// Crowds (JobStore::ScanCrowd): ScanCrowd notes the crowd in the store
// (key_codec.h), unsynced (the WAL keeps it before every write that relies
// on it), and counts its entries in a snapshot taken with the note. From
// then on Apply skips the deletes of the due entries it removes from the
// crowd's millisecond and counts them out, and counts in the entries it
// adds there. When the count reaches 0 (every job that was due there has
// left it), one write deletes the millisecond's entries by range, and the
// note; a herd's acks thus write no due-index tombstone each. So that an
// entry added there cannot fall under that range deletion, a write that
// adds one (rare: a job scheduled or moved into a millisecond being fired)
// runs alone: every other write holds gate_ shared, it holds gate_
// exclusively, as ScanCrowd does while it notes the crowd and takes its
// snapshot.
//
// Only storage/ includes RocksDB; this header only forward-declares it.
#ifndef DELAYD_STORAGE_ROCKSDB_JOB_STORE_H_
#define DELAYD_STORAGE_ROCKSDB_JOB_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/job_store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Snapshot;
struct ReadOptions;
}  // namespace rocksdb

namespace delayd::storage {

// The server-wide --sync flag.
enum class SyncMode {
  // Durability::kSync writes fsync the WAL before they return.
  kAlways,
  // No write fsyncs; the OS writes the WAL back when it likes. A kill -9
  // loses nothing, a power loss may lose the last seconds.
  kNone,
};

class RocksDbJobStore final : public JobStore {
 public:
  struct Options {
    // Default: kAlways.
    SyncMode sync_mode = SyncMode::kAlways;
    // Under kAlways, how long a Durability::kNoSync write may stay unsynced:
    // a background thread syncs the WAL this often while such writes come
    // (writers never wait for it). So a power loss loses at most the kNoSync
    // writes of the last max_unsynced_age: delivery attempt marks, acks and
    // nacks, whose loss repeats deliveries (with their attempt numbers) and
    // never loses a job. Zero: every write is synced before it returns;
    // InfiniteDuration: only kSync writes are. Default: 100 ms.
    absl::Duration max_unsynced_age = absl::Milliseconds(100);
    // Shared LRU block cache of both column families. Default: 128 MiB.
    size_t block_cache_bytes = size_t{128} << 20;
    // Memtable size of `jobs` (records, with payloads). Default: 64 MiB.
    size_t jobs_write_buffer_bytes = size_t{64} << 20;
    // Memtable size of `due` (small keys, empty values). Default: 16 MiB.
    // `expiry` (the same kind of keys, written only under --retention) gets
    // the same.
    size_t due_write_buffer_bytes = size_t{16} << 20;
    // WAL size that forces a flush of the column families holding the
    // oldest WAL file; bounds WAL replay at restart. Default: 32 MiB.
    uint64_t max_total_wal_bytes = uint64_t{32} << 20;
    // RocksDB's enable_pipelined_write (see rocksdb_options.cc). Default:
    // true. An option so that store_bench can measure it.
    bool pipelined_write = true;
    // Flush and compaction threads. Default: 2 (the target has 2 cores).
    int background_jobs = 2;
    // Open with automatic compactions off (flushes still run), so that a
    // restart's recovery scan does not share the cores with the
    // compactions RocksDB owes; the server calls EnableAutoCompactions()
    // once recovery is done. Left off, L0 files pile up until writes stall.
    // Default: false.
    bool defer_auto_compactions = false;
    // Read each mutation's stored record inside Apply and refuse a wrong
    // previous_due_ms with FAILED_PRECONDITION (one MultiGet per Apply; for
    // tests). Default: false.
    bool verify_previous_due = false;
    // Not owned; must outlive the store. Default (nullptr): Env::Default().
    // Tests pass a fault-injecting Env.
    rocksdb::Env* env = nullptr;
  };

  // Opens the store at `path`, creating the database, its column families
  // and its meta record when `path` holds none. A store of layout version 1
  // is migrated in place (the `expiry` column family is created, then the
  // meta record says 2; job_record.proto). Refuses, naming the path:
  //   a database that RocksDB cannot open (corrupt, locked by another
  //   process, unknown column families): "storage: cannot open RocksDB at
  //   <path>: <rocksdb status>", code per rocksdb_status.h;
  //   a meta record that is malformed (DATA_LOSS) or missing while the store
  //   holds jobs (DATA_LOSS), or of a newer layout version
  //   (FAILED_PRECONDITION).
  static absl::StatusOr<std::unique_ptr<RocksDbJobStore>> Open(
      const std::string& path, const Options& options);

  RocksDbJobStore(const RocksDbJobStore&) = delete;
  RocksDbJobStore& operator=(const RocksDbJobStore&) = delete;
  // Calls Close() if it was not called; its error is lost.
  ~RocksDbJobStore() override;

  // Flushes the memtables of all column families, so that the next Open
  // replays no WAL (after kill -9 it replays the WAL since the last flush,
  // at most Options::max_total_wal_bytes), and closes the database. Returns the
  // first error; the database is closed in any case. REQUIRES: no other call is
  // running or will be made, except the destructor.
  absl::Status Close();

  // Turns automatic compactions on (after Options::defer_auto_compactions).
  // Idempotent.
  absl::Status EnableAutoCompactions();

  absl::Status Apply(std::span<const Mutation> mutations,
                     Durability durability) override;
  absl::StatusOr<std::optional<JobRecord>> Get(
      std::string_view topic, std::string_view id) const override;
  absl::StatusOr<std::vector<std::optional<JobRecord>>> MultiGet(
      std::span<const JobKeyView> keys) const override;
  absl::Status ScanDue(int64_t from_ms, int64_t to_ms,
                       DueVisitor visitor) const override;
  // Also counts the crowd at `ms`, if its count failed (below), first.
  absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) override;
  // Makes `ms` a crowd (see the top of this file) unless it is one already,
  // and scans it as ScanFireMillisecond does, in the crowd's snapshot.
  // Scans without making a crowd when writes are refused. When the scan
  // fails (a read error), the crowd is not counted yet and keeps its
  // snapshot: the next ScanCrowd or ScanFireMillisecond of `ms` counts it
  // there (the fire path tries the millisecond again), before its own scan.
  // Until then the crowd cannot be released; a crowd still uncounted at
  // Close is cleared by the next Open.
  absl::Status ScanCrowd(int64_t ms, DueVisitor visitor) override;
  absl::Status ScanDueFrom(int64_t from_ms, std::string_view from_topic,
                           std::string_view from_id, int64_t to_ms,
                           MarkedDueVisitor visitor) const override;
  absl::Status ScanDueMarked(int64_t from_ms, int64_t to_ms,
                             MarkedDueVisitor visitor) const override;
  absl::Status ScanExpiry(int64_t from_ms, int64_t to_ms,
                          DueVisitor visitor) const override;
  absl::Status ScanJobs(std::string_view topic, std::string_view id_prefix,
                        std::string_view start_after_id,
                        JobVisitor visitor) const override;
  absl::Status ScanTopics(TopicVisitor visitor) const override;
  absl::Status Resume() override;
  StoreStats stats() const override { return counters_.Snapshot(); }
  // Crowds open now (ScanCrowd), for tests and diagnostics.
  size_t crowds() const { return crowd_count_.load(std::memory_order_relaxed); }
  // WAL syncs the syncer made (Options::max_unsynced_age).
  uint64_t background_wal_syncs() const {
    return wal_syncs_.load(std::memory_order_relaxed);
  }

  // A RocksDB property of column family `column_family` ("default", "jobs",
  // "due" or "expiry"), for diagnostics, metrics and benchmarks, e.g.
  // ("jobs", "rocksdb.estimate-num-keys"). Db-wide properties such as
  // "rocksdb.dbstats" (write groups, WAL syncs) are kept with "default".
  // nullopt when unknown.
  std::optional<std::string> GetProperty(std::string_view column_family,
                                         const std::string& name) const;

 private:
  RocksDbJobStore(std::string path, const Options& options,
                  std::unique_ptr<rocksdb::DB> db,
                  rocksdb::ColumnFamilyHandle* jobs,
                  rocksdb::ColumnFamilyHandle* due,
                  rocksdb::ColumnFamilyHandle* expiry);

  // The sticky write error, OK when writes are accepted.
  absl::Status WriteError() const ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `error` (a failed write's) the sticky write error, unless there
  // is one.
  void SetWriteError(const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  // Apply's write, with gate_ held: shared, or exclusively when a mutation
  // adds a due entry into a crowd's millisecond (AddsIntoCrowd).
  absl::Status WriteMutations(std::span<const Mutation> mutations,
                              Durability durability, bool sync,
                              absl::Time start)
      ABSL_SHARED_LOCKS_REQUIRED(gate_) ABSL_LOCKS_EXCLUDED(crowd_mu_);
  bool AddsIntoCrowd(std::span<const Mutation> mutations) const
      ABSL_SHARED_LOCKS_REQUIRED(gate_) ABSL_LOCKS_EXCLUDED(crowd_mu_);
  // Deletes the entries of crowd `ms`, counted down to none, by range, and
  // its note; the crowd then ends. REQUIRES: crowds_[ms].releasing was set
  // by this caller.
  void ReleaseCrowd(int64_t ms) ABSL_SHARED_LOCKS_REQUIRED(gate_)
      ABSL_LOCKS_EXCLUDED(crowd_mu_);
  // Counts crowd `ms`'s entries in `snapshot`, the one taken when it was
  // made, visiting them with `visitor` (when not null), and releases the
  // snapshot; or, when the read fails, leaves it with the crowd for
  // CountFailedCrowd. REQUIRES: crowds_[ms] exists, is not counted and has
  // no snapshot of its own.
  absl::Status CountCrowd(int64_t ms, const rocksdb::Snapshot* snapshot,
                          DueVisitor* visitor)
      ABSL_LOCKS_EXCLUDED(gate_, crowd_mu_);
  // CountCrowd for the crowd at `ms` whose count failed; OK at once for
  // any other millisecond.
  absl::Status CountFailedCrowd(int64_t ms)
      ABSL_LOCKS_EXCLUDED(gate_, crowd_mu_);
  // Open's clearing of the crowds a crash (or a close) left: deletes the
  // entries of each noted millisecond that no record is due at, then the
  // note.
  absl::Status ClearCrowds();
  // Migration to layout 6: rewrites every due entry with its job's payload
  // size, in batches; Open then stores the layout. After a crash part-way
  // the meta still says the old layout and the next Open does it again.
  absl::Status AddPayloadSizes();
  absl::Status VerifyPreviousDue(std::span<const Mutation> mutations) const;
  // The records of the jobs that the due keys `keys` name, in their order
  // (MultiGet). DATA_LOSS for a malformed key.
  absl::StatusOr<std::vector<std::optional<JobRecord>>> RecordsOfDueKeys(
      const std::vector<std::string>& keys) const;
  // MultiGet's read of a large batch, with `read` (its snapshot): the keys
  // in key order, each reached from the last by a few steps of one
  // iterator, or by a seek. A herd's records lie next to each other, and a
  // step costs much less than a point lookup, which probes every table
  // file's filter and index. When the keys turn out to be scattered (more
  // than one seek per kWalkKeysPerSeek keys), it stops and leaves the keys
  // not yet read in `rest`, in no particular order, for RocksDB's MultiGet.
  absl::Status WalkRead(const rocksdb::ReadOptions& read,
                        std::span<const JobKeyView> keys,
                        const std::vector<std::string>& encoded,
                        std::vector<std::optional<JobRecord>>& out,
                        std::vector<size_t>& rest) const;
  static constexpr size_t kWalkMinKeys = 64;
  static constexpr int kWalkMaxSteps = 4;
  static constexpr size_t kWalkKeysPerSeek = 8;
  // The scans of the due and expiry indexes: the keys of `cf` (due-key
  // encoded) in [from_ms, to_ms), from the key `start` on (empty: from
  // from_ms), read with `base` and the range's bounds; with their values
  // when `marks` (else empty values).
  absl::Status ScanIndex(rocksdb::ColumnFamilyHandle* cf,
                         const rocksdb::ReadOptions& base, int64_t from_ms,
                         int64_t to_ms, MarkedDueVisitor visitor,
                         std::string_view start = {}, bool marks = false) const;

  // Constant after construction (until Close).
  const std::string path_;
  const Options options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* jobs_cf_;  // Owned; released by Close.
  rocksdb::ColumnFamilyHandle* due_cf_;   // Owned; released by Close.
  // Owned; released by Close. Set by Open (created there for a layout-1
  // store).
  rocksdb::ColumnFamilyHandle* expiry_cf_;

  StoreCounters counters_;

  // Crowds (see the top of this file). Lock order: gate_, then crowd_mu_.
  struct Crowd {
    // Entries at the crowd's millisecond: those of its snapshot (once
    // counted), plus the writes' additions, minus their removals.
    int64_t live = 0;
    bool counted = false;
    // Its range deletion is being written.
    bool releasing = false;
    // Not counted yet, for its scan failed: the snapshot of its making, in
    // which CountFailedCrowd counts it.
    const rocksdb::Snapshot* snapshot = nullptr;
  };
  absl::Mutex gate_ ABSL_ACQUIRED_BEFORE(crowd_mu_);
  mutable absl::Mutex crowd_mu_;
  absl::flat_hash_map<int64_t, Crowd> crowds_ ABSL_GUARDED_BY(crowd_mu_);
  // crowds_.size(), readable without crowd_mu_. It grows only under gate_
  // held exclusively, so a holder of gate_ that reads 0 sees no crowd for
  // as long as it holds it.
  std::atomic<size_t> crowd_count_{0};

  mutable absl::Mutex mu_;
  absl::Status write_error_ ABSL_GUARDED_BY(mu_);
  // !write_error_.ok(), readable without mu_ on the write path; written
  // under mu_.
  std::atomic<bool> write_failed_{false};

  // The WAL syncer (Options::max_unsynced_age): it syncs the WAL every
  // max_unsynced_age while unsynced_ says a kNoSync write came since its
  // last sync. Runs from Open to Close.
  void SyncWalEvery(absl::Duration interval) ABSL_LOCKS_EXCLUDED(syncer_mu_);
  std::atomic<bool> unsynced_{false};
  std::atomic<uint64_t> wal_syncs_{0};
  absl::Mutex syncer_mu_;
  bool syncer_stop_ ABSL_GUARDED_BY(syncer_mu_) = false;
  std::thread syncer_;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_ROCKSDB_JOB_STORE_H_
