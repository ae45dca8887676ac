// RocksDbJobStore's crowds (rocksdb_job_store.h): ScanCrowd, which makes
// one and scans it, the release of a crowd counted down to no entry, and
// Open's clearing of the crowds a crash left. Apply's side of them (the
// skipped deletes and the counts) is in rocksdb_job_store.cc.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_job_store.h"
#include "storage/rocksdb_options.h"
#include "storage/rocksdb_status.h"

namespace delayd::storage {

void RocksDbJobStore::ReleaseCrowd(int64_t ms) {
  rocksdb::WriteBatch batch;
  rocksdb::Status s =
      batch.DeleteRange(due_cf_, EncodeDueTime(ms), EncodeDueTime(EndOfMs(ms)));
  if (s.ok()) s = batch.Delete(db_->DefaultColumnFamily(), EncodeCrowdKey(ms));
  // Unsynced: a crash that loses it keeps the note, and Open clears the
  // crowd.
  if (s.ok()) s = db_->Write(rocksdb::WriteOptions(), &batch);
  if (s.ok()) {
    unsynced_.store(true, std::memory_order_relaxed);
  } else {
    SetWriteError(
        FromRocksDb(s, absl::StrCat("storage: range deletion of the crowd at ",
                                    ms, " in ", path_, " failed")));
  }
  absl::MutexLock lock(&crowd_mu_);
  if (s.ok()) {
    crowds_.erase(ms);
    crowd_count_.fetch_sub(1, std::memory_order_release);
  } else {
    // Never released while the store is open; the next Open clears it.
    crowds_[ms].releasing = true;
  }
}

absl::Status RocksDbJobStore::ScanCrowd(int64_t ms, DueVisitor visitor) {
  ms = ClampDueMs(ms);
  const rocksdb::Snapshot* snapshot = nullptr;
  {
    absl::WriterMutexLock gate(&gate_);
    bool open;
    {
      absl::MutexLock lock(&crowd_mu_);
      open = crowds_.contains(ms);
    }
    if (!open && ms < std::numeric_limits<int64_t>::max() &&
        WriteError().ok()) {
      const rocksdb::Status s =
          db_->Put(rocksdb::WriteOptions(), db_->DefaultColumnFamily(),
                   EncodeCrowdKey(ms), rocksdb::Slice());
      if (s.ok()) {
        unsynced_.store(true, std::memory_order_relaxed);
        snapshot = db_->GetSnapshot();
        absl::MutexLock lock(&crowd_mu_);
        crowds_.emplace(ms, Crowd{});
        crowd_count_.fetch_add(1, std::memory_order_release);
      } else {
        SetWriteError(
            FromRocksDb(s, absl::StrCat("storage: note of the crowd at ", ms,
                                        " in ", path_, " failed")));
      }
    }
  }
  // Already a crowd (its count, if it failed, is made there).
  if (snapshot == nullptr) return ScanFireMillisecond(ms, visitor);
  return CountCrowd(ms, snapshot, &visitor);
}

absl::Status RocksDbJobStore::CountCrowd(int64_t ms,
                                         const rocksdb::Snapshot* snapshot,
                                         DueVisitor* visitor) {
  // Every entry in the snapshot is counted, also those after the visitor
  // stops.
  const std::string lower = EncodeDueTime(ms);
  const std::string upper = EncodeDueTime(EndOfMs(ms));
  const rocksdb::Slice lower_slice(lower);
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read = FireScanReadOptions();
  read.snapshot = snapshot;
  read.iterate_lower_bound = &lower_slice;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, due_cf_));
  int64_t entries = 0;
  bool visiting = visitor != nullptr;
  absl::Status visited;
  for (it->Seek(lower_slice); it->Valid(); it->Next()) {
    ++entries;
    if (!visiting) continue;
    absl::StatusOr<DueKeyView> due = DecodeDueKey(it->key().ToStringView());
    if (!due.ok()) {
      visited = due.status();
      visiting = false;
      continue;
    }
    visiting = (*visitor)(due->due_ms, due->topic, due->id);
  }
  const rocksdb::Status s = it->status();
  it.reset();
  if (!s.ok()) {
    // The crowd keeps its snapshot, in which the next scan of `ms` counts
    // it: the writes since the snapshot are counted already.
    absl::MutexLock lock(&crowd_mu_);
    crowds_[ms].snapshot = snapshot;
    return FromRocksDb(s, "storage: due index scan of a crowd failed");
  }
  db_->ReleaseSnapshot(snapshot);
  bool emptied = false;
  {
    absl::MutexLock lock(&crowd_mu_);
    Crowd& crowd = crowds_[ms];
    crowd.live += entries;
    crowd.counted = true;
    if (crowd.live == 0 && !crowd.releasing) {
      crowd.releasing = true;
      emptied = true;
    }
  }
  if (emptied) {
    absl::ReaderMutexLock gate(&gate_);
    ReleaseCrowd(ms);
  }
  return visited;
}

absl::Status RocksDbJobStore::CountFailedCrowd(int64_t ms) {
  if (crowd_count_.load(std::memory_order_acquire) == 0)
    return absl::OkStatus();
  const rocksdb::Snapshot* snapshot = nullptr;
  {
    absl::MutexLock lock(&crowd_mu_);
    auto it = crowds_.find(ClampDueMs(ms));
    if (it == crowds_.end()) return absl::OkStatus();
    // Taken: a concurrent scan does not count it twice.
    snapshot = std::exchange(it->second.snapshot, nullptr);
  }
  if (snapshot == nullptr) return absl::OkStatus();
  return CountCrowd(ClampDueMs(ms), snapshot, nullptr);
}

absl::Status RocksDbJobStore::ClearCrowds() {
  std::vector<int64_t> crowds;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), db_->DefaultColumnFamily()));
    const std::string_view prefix(kCrowdKeyPrefix);
    for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size()));
         it->Valid() &&
         it->key().starts_with(rocksdb::Slice(prefix.data(), prefix.size()));
         it->Next()) {
      absl::StatusOr<int64_t> ms = DecodeCrowdKey(it->key().ToStringView());
      if (!ms.ok()) return ms.status();
      crowds.push_back(*ms);
    }
    if (!it->status().ok()) {
      return FromRocksDb(it->status(), "scanning the crowds' notes");
    }
  }
  constexpr size_t kChunk = 1024;
  for (const int64_t ms : crowds) {
    std::vector<std::string> keys;  // due keys
    // Deletes the chunk's entries whose job is not due at `ms`.
    auto clear = [&]() -> absl::Status {
      absl::StatusOr<std::vector<std::optional<JobRecord>>> records =
          RecordsOfDueKeys(keys);
      if (!records.ok()) return records.status();
      rocksdb::WriteBatch batch;
      for (size_t i = 0; i < keys.size(); ++i) {
        const std::optional<JobRecord>& record = (*records)[i];
        if (record.has_value() && DueIndexEntryOf(*record) == ms) continue;
        rocksdb::Status s = batch.Delete(due_cf_, keys[i]);
        if (!s.ok()) return FromRocksDb(s, "building a write batch");
      }
      keys.clear();
      return FromRocksDb(db_->Write(rocksdb::WriteOptions(), &batch),
                         "clearing a crowd's due entries");
    };
    const std::string lower = EncodeDueTime(ms);
    const std::string upper = EncodeDueTime(EndOfMs(ms));
    const rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions read = DueScanReadOptions();
    read.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, due_cf_));
    for (it->Seek(lower); it->Valid(); it->Next()) {
      keys.emplace_back(it->key().ToStringView());
      if (keys.size() == kChunk) {
        if (absl::Status s = clear(); !s.ok()) return s;
      }
    }
    if (!it->status().ok()) {
      return FromRocksDb(it->status(), "scanning a crowd's due entries");
    }
    if (absl::Status s = clear(); !s.ok()) return s;
    const rocksdb::Status s =
        db_->Delete(rocksdb::WriteOptions(), db_->DefaultColumnFamily(),
                    EncodeCrowdKey(ms));
    if (!s.ok()) return FromRocksDb(s, "deleting a crowd's note");
  }
  return absl::OkStatus();
}

}  // namespace delayd::storage
