// FaultInjectingFileSystem: a rocksdb::FileSystem that forwards to another
// and, once armed, makes writes to the write-ahead log (files *.log) fail:
// an I/O error, a full disk, a torn append (half the bytes reach the file,
// then an error), or a failed fsync after a complete append. From the first
// injected fault on, every later WAL append and sync fails with an I/O
// error (a dead disk) until Disarm(), so what the files hold afterwards is
// exactly what reached them before the fault: reopening the database with
// the plain file system shows what a crash at that moment leaves.
//
// Reads of table files (*.sst) can be made to fail too, while ArmReads()
// holds (a bad sector, a lost network disk): every read of a block not in
// RocksDB's block cache fails with an I/O error until DisarmReads().
//
// Thread-safe. Share it with an Env from NewFaultInjectingEnv and pass that
// Env in RocksDbJobStore::Options::env. Part of delayd_storage_testing.
#ifndef DELAYD_STORAGE_FAULT_INJECTING_FILE_SYSTEM_H_
#define DELAYD_STORAGE_FAULT_INJECTING_FILE_SYSTEM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

namespace delayd::storage {

enum class WalFault {
  kIoError,    // The append fails with IOError; nothing reaches the file.
  kNoSpace,    // The append fails with IOError(NoSpace); nothing reaches it.
  kTornWrite,  // The first half of the bytes reach the file, then IOError.
  kSyncError,  // The append succeeds; the next WAL sync fails with IOError.
};

class FaultInjectingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FaultInjectingFileSystem(
      const std::shared_ptr<rocksdb::FileSystem>& base);

  // Fails the WAL append that follows `appends_to_skip` more successful
  // ones as `fault` says (for kSyncError: the first sync after them).
  // REQUIRES: appends_to_skip >= 0.
  void Arm(WalFault fault, int appends_to_skip = 0) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops injecting; later WAL writes reach the base file system again.
  void Disarm() ABSL_LOCKS_EXCLUDED(mu_);
  // Makes every later read of a table file fail with an I/O error, until
  // DisarmReads(). Independent of Arm and Disarm.
  void ArmReads() ABSL_LOCKS_EXCLUDED(mu_);
  void DisarmReads() ABSL_LOCKS_EXCLUDED(mu_);
  // Faults injected so far (the first one and every later refused call),
  // WAL faults and failed reads both.
  int faults_injected() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes that reached WAL files through this file system so far, torn
  // halves included. Unlike the files' sizes, it does not change when
  // RocksDB switches to a new WAL file or deletes an obsolete one in the
  // background.
  uint64_t wal_bytes_appended() const ABSL_LOCKS_EXCLUDED(mu_);
  // Called by the WAL file wrapper for each append that reached the file.
  void CountAppended(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const char* Name() const override { return "DelaydFaultInjectingFileSystem"; }
  rocksdb::IOStatus NewWritableFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& fname, const std::string& old_fname,
      const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
      rocksdb::IODebugContext* dbg) override;

  // What a WAL file does with its next append or sync. Called by the WAL
  // file wrapper.
  enum class Action { kPass, kFail, kFailNoSpace, kTear };
  Action OnAppend() ABSL_LOCKS_EXCLUDED(mu_);
  Action OnSync() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a table file's read fails (counted when it does). Called by the
  // table file wrapper.
  bool OnRead() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Wraps `result` when fname is a WAL file.
  void MaybeWrap(const std::string& fname,
                 std::unique_ptr<rocksdb::FSWritableFile>* result);

  mutable absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;  // A fault happened.
  WalFault fault_ ABSL_GUARDED_BY(mu_) = WalFault::kIoError;
  int appends_to_skip_ ABSL_GUARDED_BY(mu_) = 0;
  bool sync_fault_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_armed_ ABSL_GUARDED_BY(mu_) = false;
  int faults_injected_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t wal_bytes_appended_ ABSL_GUARDED_BY(mu_) = 0;
};

// An Env that uses `fs` for files and Env::Default() for everything else.
std::unique_ptr<rocksdb::Env> NewFaultInjectingEnv(
    std::shared_ptr<FaultInjectingFileSystem> fs);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_FAULT_INJECTING_FILE_SYSTEM_H_
