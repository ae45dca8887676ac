#include "storage/fault_injecting_file_system.h"

#include <functional>
#include <utility>

#include "absl/strings/match.h"

namespace delayd::storage {
namespace {

using Action = FaultInjectingFileSystem::Action;

rocksdb::IOStatus Injected(Action action) {
  if (action == Action::kFailNoSpace) {
    return rocksdb::IOStatus::NoSpace("injected by FaultInjectingFileSystem");
  }
  return rocksdb::IOStatus::IOError("injected by FaultInjectingFileSystem");
}

// A WAL file whose appends and syncs ask the file system what to do.
class FaultInjectingWalFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultInjectingWalFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                        FaultInjectingFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(target)), fs_(fs) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    const Action action = fs_->OnAppend();
    if (action == Action::kPass) {
      rocksdb::IOStatus s = target()->Append(data, options, dbg);
      if (s.ok()) fs_->CountAppended(data.size());
      return s;
    }
    if (action == Action::kTear) {
      const rocksdb::Slice half(data.data(), data.size() / 2);
      if (target()->Append(half, options, dbg).ok()) {
        fs_->CountAppended(half.size());
      }
      target()->Flush(options, dbg).PermitUncheckedError();
    }
    return Injected(action);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& /*info*/,
                           rocksdb::IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    const Action action = fs_->OnSync();
    if (action != Action::kPass) return Injected(action);
    return target()->Sync(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    const Action action = fs_->OnSync();
    if (action != Action::kPass) return Injected(action);
    return target()->Fsync(options, dbg);
  }

 private:
  FaultInjectingFileSystem* const fs_;  // Outlives its files.
};

// A table file whose reads ask the file system whether to fail.
class FaultInjectingTableFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultInjectingTableFile(std::unique_ptr<rocksdb::FSRandomAccessFile> target,
                          FaultInjectingFileSystem* fs)
      : FSRandomAccessFileOwnerWrapper(std::move(target)), fs_(fs) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n,
                         const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    if (fs_->OnRead()) return Injected(Action::kFail);
    return target()->Read(offset, n, options, result, scratch, dbg);
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (fs_->OnRead()) {
      for (size_t i = 0; i < num_reqs; ++i) {
        reqs[i].status = Injected(Action::kFail);
      }
      return Injected(Action::kFail);
    }
    return target()->MultiRead(reqs, num_reqs, options, dbg);
  }
  rocksdb::IOStatus ReadAsync(
      rocksdb::FSReadRequest& req, const rocksdb::IOOptions& opts,
      std::function<void(const rocksdb::FSReadRequest&, void*)> cb,
      void* cb_arg, void** io_handle, rocksdb::IOHandleDeleter* del_fn,
      rocksdb::IODebugContext* dbg) override {
    if (fs_->OnRead()) return Injected(Action::kFail);
    return target()->ReadAsync(req, opts, std::move(cb), cb_arg, io_handle,
                               del_fn, dbg);
  }

 private:
  FaultInjectingFileSystem* const fs_;  // Outlives its files.
};

}  // namespace

FaultInjectingFileSystem::FaultInjectingFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& base)
    : FileSystemWrapper(base) {}

void FaultInjectingFileSystem::Arm(WalFault fault, int appends_to_skip) {
  absl::MutexLock lock(&mu_);
  armed_ = true;
  fault_ = fault;
  appends_to_skip_ = appends_to_skip;
  sync_fault_pending_ = false;
}

void FaultInjectingFileSystem::Disarm() {
  absl::MutexLock lock(&mu_);
  armed_ = false;
  dead_ = false;
  sync_fault_pending_ = false;
}

void FaultInjectingFileSystem::ArmReads() {
  absl::MutexLock lock(&mu_);
  reads_armed_ = true;
}

void FaultInjectingFileSystem::DisarmReads() {
  absl::MutexLock lock(&mu_);
  reads_armed_ = false;
}

bool FaultInjectingFileSystem::OnRead() {
  absl::MutexLock lock(&mu_);
  if (reads_armed_) ++faults_injected_;
  return reads_armed_;
}

int FaultInjectingFileSystem::faults_injected() const {
  absl::MutexLock lock(&mu_);
  return faults_injected_;
}

uint64_t FaultInjectingFileSystem::wal_bytes_appended() const {
  absl::MutexLock lock(&mu_);
  return wal_bytes_appended_;
}

void FaultInjectingFileSystem::CountAppended(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  wal_bytes_appended_ += bytes;
}

FaultInjectingFileSystem::Action FaultInjectingFileSystem::OnAppend() {
  absl::MutexLock lock(&mu_);
  if (dead_) {
    ++faults_injected_;
    return Action::kFail;
  }
  if (!armed_) return Action::kPass;
  if (appends_to_skip_ > 0) {
    --appends_to_skip_;
    return Action::kPass;
  }
  armed_ = false;
  if (fault_ == WalFault::kSyncError) {
    sync_fault_pending_ = true;  // This append goes through; its sync fails.
    return Action::kPass;
  }
  dead_ = true;
  ++faults_injected_;
  switch (fault_) {
    case WalFault::kNoSpace:
      return Action::kFailNoSpace;
    case WalFault::kTornWrite:
      return Action::kTear;
    default:
      return Action::kFail;
  }
}

FaultInjectingFileSystem::Action FaultInjectingFileSystem::OnSync() {
  absl::MutexLock lock(&mu_);
  if (!dead_ && !sync_fault_pending_) return Action::kPass;
  sync_fault_pending_ = false;
  dead_ = true;
  ++faults_injected_;
  return Action::kFail;
}

void FaultInjectingFileSystem::MaybeWrap(
    const std::string& fname,
    std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (absl::EndsWith(fname, ".log") && *result != nullptr) {
    *result = std::make_unique<FaultInjectingWalFile>(std::move(*result), this);
  }
}

rocksdb::IOStatus FaultInjectingFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
  if (s.ok()) MaybeWrap(fname, result);
  return s;
}

rocksdb::IOStatus FaultInjectingFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s =
      target()->ReopenWritableFile(fname, options, result, dbg);
  if (s.ok()) MaybeWrap(fname, result);
  return s;
}

rocksdb::IOStatus FaultInjectingFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s =
      target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  if (s.ok()) MaybeWrap(fname, result);
  return s;
}

rocksdb::IOStatus FaultInjectingFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s =
      target()->NewRandomAccessFile(fname, options, result, dbg);
  if (s.ok() && absl::EndsWith(fname, ".sst") && *result != nullptr) {
    *result =
        std::make_unique<FaultInjectingTableFile>(std::move(*result), this);
  }
  return s;
}

std::unique_ptr<rocksdb::Env> NewFaultInjectingEnv(
    std::shared_ptr<FaultInjectingFileSystem> fs) {
  return rocksdb::NewCompositeEnv(std::move(fs));
}

}  // namespace delayd::storage
