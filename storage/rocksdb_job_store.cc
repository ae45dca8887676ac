#include "storage/rocksdb_job_store.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/iterator.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_options.h"
#include "storage/rocksdb_status.h"
#include "storage/store_meta.h"

namespace delayd::storage {
namespace {

absl::StatusOr<bool> DatabaseExists(rocksdb::Env* env,
                                    const std::string& path) {
  const rocksdb::Status s = env->FileExists(path + "/CURRENT");
  if (s.ok()) return true;
  if (s.IsNotFound()) return false;
  return FromRocksDb(s, absl::StrCat("storage: cannot open RocksDB at ", path));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbJobStore>> RocksDbJobStore::Open(
    const std::string& path, const Options& options) {
  rocksdb::DBOptions db_options = MakeDbOptions(options);
  absl::StatusOr<bool> exists = DatabaseExists(db_options.env, path);
  if (!exists.ok()) return exists.status();
  // Create only into an empty place: an existing database must already
  // have exactly our column families, or Open refuses it — except `expiry`,
  // which a layout-1 store lacks and which is created below.
  db_options.create_if_missing = !*exists;
  db_options.create_missing_column_families = !*exists;
  std::vector<rocksdb::ColumnFamilyDescriptor> families =
      MakeColumnFamilies(options);
  const rocksdb::ColumnFamilyDescriptor expiry_family = families.back();
  bool has_expiry = true;
  if (*exists) {
    std::vector<std::string> names;
    const rocksdb::Status listed =
        rocksdb::DB::ListColumnFamilies(db_options, path, &names);
    if (!listed.ok()) {
      return FromRocksDb(
          listed, absl::StrCat("storage: cannot open RocksDB at ", path));
    }
    has_expiry = std::find(names.begin(), names.end(), kExpiryColumnFamily) !=
                 names.end();
    if (!has_expiry) families.pop_back();
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, families, &handles, &raw_db);
  if (!s.ok()) {
    return FromRocksDb(s,
                       absl::StrCat("storage: cannot open RocksDB at ", path));
  }
  std::unique_ptr<rocksdb::DB> db(raw_db);
  // handles: default, jobs, due[, expiry]. The default one is not needed.
  db->DestroyColumnFamilyHandle(handles[0]).PermitUncheckedError();
  auto store = std::unique_ptr<RocksDbJobStore>(
      new RocksDbJobStore(path, options, std::move(db), handles[1], handles[2],
                          has_expiry ? handles[3] : nullptr));
  // ~RocksDbJobStore closes the database on every error below.
  absl::StatusOr<uint32_t> version = CheckOrCreateMeta(
      store->db_.get(), store->jobs_cf_, store->due_cf_, path);
  if (!version.ok()) return version.status();
  // Migration from layout 1 (job_record.proto): add `expiry`, then say so.
  if (!has_expiry) {
    s = store->db_->CreateColumnFamily(expiry_family.options,
                                       expiry_family.name, &store->expiry_cf_);
    if (!s.ok()) {
      return FromRocksDb(
          s, absl::StrCat("storage: cannot migrate the store at ", path,
                          " to layout ", kStoreLayoutVersion,
                          ": creating column family ", kExpiryColumnFamily));
    }
  }
  if (*version < 6) {
    if (absl::Status a = store->AddPayloadSizes(); !a.ok()) {
      return absl::Status(
          a.code(),
          absl::StrCat("storage: cannot migrate the store at ", path,
                       " to layout ", kStoreLayoutVersion, ": ", a.message()));
    }
  }
  // What a crash left of the crowds (layout 7).
  if (absl::Status c = store->ClearCrowds(); !c.ok()) {
    return absl::Status(
        c.code(), absl::StrCat("storage: cannot clear the crowds of the store "
                               "at ",
                               path, ": ", c.message()));
  }
  if (*version < kStoreLayoutVersion) {
    if (absl::Status w = WriteMeta(store->db_.get(), kStoreLayoutVersion, path);
        !w.ok()) {
      return w;
    }
  }
  return store;
}

absl::Status RocksDbJobStore::AddPayloadSizes() {
  constexpr size_t kChunk = 1024;
  std::vector<std::string> keys;  // due keys
  std::vector<DueValue> values;
  // Writes the chunk's entries again with their records' payload sizes.
  auto rewrite = [&]() -> absl::Status {
    absl::StatusOr<std::vector<std::optional<JobRecord>>> records =
        RecordsOfDueKeys(keys);
    if (!records.ok()) return records.status();
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::optional<JobRecord>& record = (*records)[i];
      if (!record.has_value()) continue;  // not ours to mend here
      values[i].payload_bytes = record->job().payload().size();
      rocksdb::Status s =
          batch.Put(due_cf_, keys[i], EncodeDueValue(values[i]));
      if (!s.ok()) return FromRocksDb(s, "building a write batch");
    }
    keys.clear();
    values.clear();
    return FromRocksDb(db_->Write(rocksdb::WriteOptions(), &batch),
                       "rewriting due entries");
  };
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(DueScanReadOptions(), due_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<DueValue> value =
        DecodeDueValue(it->key().ToStringView(), it->value().ToStringView());
    if (!value.ok()) return value.status();
    keys.emplace_back(it->key().ToStringView());
    values.push_back(*value);
    if (keys.size() == kChunk) {
      if (absl::Status s = rewrite(); !s.ok()) return s;
    }
  }
  if (!it->status().ok()) {
    return FromRocksDb(it->status(), "scanning the due index");
  }
  return keys.empty() ? absl::OkStatus() : rewrite();
}

RocksDbJobStore::RocksDbJobStore(std::string path, const Options& options,
                                 std::unique_ptr<rocksdb::DB> db,
                                 rocksdb::ColumnFamilyHandle* jobs,
                                 rocksdb::ColumnFamilyHandle* due,
                                 rocksdb::ColumnFamilyHandle* expiry)
    : path_(std::move(path)),
      options_(options),
      db_(std::move(db)),
      jobs_cf_(jobs),
      due_cf_(due),
      expiry_cf_(expiry) {
  if (options_.sync_mode == SyncMode::kAlways &&
      options_.max_unsynced_age > absl::ZeroDuration() &&
      options_.max_unsynced_age != absl::InfiniteDuration()) {
    syncer_ = std::thread(&RocksDbJobStore::SyncWalEvery, this,
                          options_.max_unsynced_age);
  }
}

void RocksDbJobStore::SyncWalEvery(absl::Duration interval) {
  absl::MutexLock lock(&syncer_mu_);
  while (
      !syncer_mu_.AwaitWithTimeout(absl::Condition(&syncer_stop_), interval)) {
    if (!unsynced_.exchange(false, std::memory_order_relaxed)) continue;
    // Every write that set the flag before the exchange has returned, so
    // it is in the WAL this syncs. A failure leaves those writes as they
    // were promised: unsynced.
    syncer_mu_.Unlock();
    const rocksdb::Status s = db_->SyncWAL();
    syncer_mu_.Lock();
    if (s.ok()) {
      wal_syncs_.fetch_add(1, std::memory_order_relaxed);
    } else {
      unsynced_.store(true, std::memory_order_relaxed);  // try again
    }
  }
}

RocksDbJobStore::~RocksDbJobStore() { Close().IgnoreError(); }

absl::Status RocksDbJobStore::Close() {
  if (syncer_.joinable()) {
    {
      absl::MutexLock lock(&syncer_mu_);
      syncer_stop_ = true;
    }
    syncer_.join();
  }
  if (db_ == nullptr) return absl::OkStatus();
  absl::Status result;
  if (WriteError().ok()) {
    rocksdb::FlushOptions flush;
    flush.wait = true;
    // Every column family: any unflushed one keeps the WAL alive, and Open
    // would replay all of it.
    std::vector<rocksdb::ColumnFamilyHandle*> all = {db_->DefaultColumnFamily(),
                                                     jobs_cf_, due_cf_};
    if (expiry_cf_ != nullptr) all.push_back(expiry_cf_);
    result = FromRocksDb(db_->Flush(flush, all),
                         absl::StrCat("storage: flush at close of ", path_));
  }
  {
    // The snapshots of crowds whose count failed: the DB does not close
    // while it has any. The next Open clears those crowds.
    absl::MutexLock lock(&crowd_mu_);
    for (auto& [ms, crowd] : crowds_) {
      if (crowd.snapshot != nullptr) {
        db_->ReleaseSnapshot(std::exchange(crowd.snapshot, nullptr));
      }
    }
  }
  for (rocksdb::ColumnFamilyHandle* cf : {jobs_cf_, due_cf_, expiry_cf_}) {
    if (cf != nullptr)
      db_->DestroyColumnFamilyHandle(cf).PermitUncheckedError();
  }
  jobs_cf_ = due_cf_ = expiry_cf_ = nullptr;
  const rocksdb::Status s = db_->Close();
  if (result.ok()) {
    result = FromRocksDb(s, absl::StrCat("storage: close of ", path_));
  }
  db_.reset();
  return result;
}

absl::Status RocksDbJobStore::EnableAutoCompactions() {
  for (rocksdb::ColumnFamilyHandle* cf : {jobs_cf_, due_cf_, expiry_cf_}) {
    const rocksdb::Status s =
        db_->SetOptions(cf, {{"disable_auto_compactions", "false"}});
    if (!s.ok()) {
      return FromRocksDb(s, absl::StrCat("storage: cannot enable compactions "
                                         "of ",
                                         cf->GetName(), " at ", path_));
    }
  }
  return absl::OkStatus();
}

absl::Status RocksDbJobStore::WriteError() const {
  if (!write_failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return write_error_;
}

absl::Status RocksDbJobStore::Apply(std::span<const Mutation> mutations,
                                    Durability durability) {
  if (mutations.empty()) return absl::OkStatus();
  // Malformed calls are caller bugs, not write failures: not counted.
  if (absl::Status s = ValidateMutations(mutations); !s.ok()) return s;
  if (options_.verify_previous_due) {
    if (absl::Status s = VerifyPreviousDue(mutations); !s.ok()) return s;
  }
  const bool sync = options_.sync_mode == SyncMode::kAlways &&
                    (durability != Durability::kNoSync ||
                     options_.max_unsynced_age == absl::ZeroDuration());
  const absl::Time start = absl::Now();
  if (absl::Status s = WriteError(); !s.ok()) {
    counters_.RecordWrite(false, sync, mutations.size(), absl::Now() - start);
    return s;
  }
  {
    absl::ReaderMutexLock gate(&gate_);
    if (!AddsIntoCrowd(mutations)) {
      return WriteMutations(mutations, durability, sync, start);
    }
  }
  absl::WriterMutexLock gate(&gate_);
  return WriteMutations(mutations, durability, sync, start);
}

bool RocksDbJobStore::AddsIntoCrowd(std::span<const Mutation> mutations) const {
  if (crowd_count_.load(std::memory_order_acquire) == 0) return false;
  absl::MutexLock lock(&crowd_mu_);
  for (const Mutation& m : mutations) {
    if (m.kind() == Mutation::Kind::kPut && m.new_due_ms().has_value() &&
        m.previous_due_ms() != m.new_due_ms() &&
        crowds_.contains(ClampDueMs(*m.new_due_ms()))) {
      return true;
    }
  }
  return false;
}

absl::Status RocksDbJobStore::WriteMutations(
    std::span<const Mutation> mutations, Durability durability, bool sync,
    absl::Time start) {
  // The crowds' milliseconds. While gate_ is held none is added, and none
  // ends that this write removes an entry from (its count includes that
  // entry).
  std::vector<int64_t> crowds;
  if (crowd_count_.load(std::memory_order_acquire) > 0) {
    absl::MutexLock lock(&crowd_mu_);
    for (const auto& [ms, crowd] : crowds_) crowds.push_back(ms);
  }
  // Entries this write adds to (+) and removes from (-) each crowd.
  std::vector<std::pair<int64_t, int64_t>> counts;
  const auto count_in_crowd = [&](int64_t due_ms, int64_t n) {
    due_ms = ClampDueMs(due_ms);
    if (std::find(crowds.begin(), crowds.end(), due_ms) == crowds.end()) {
      return false;
    }
    for (auto& [ms, c] : counts) {
      if (ms == due_ms) {
        c += n;
        return true;
      }
    }
    counts.emplace_back(due_ms, n);
    return true;
  };

  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  std::string value;
  for (const Mutation& m : mutations) {
    if (m.kind() == Mutation::Kind::kMarkAttempt) {
      // The due entry alone, its value the mark; the record stays.
      s = batch.Put(due_cf_, EncodeDueKey(*m.new_due_ms(), m.topic(), m.id()),
                    EncodeDueValue({m.attempt(), m.payload_bytes()}));
      if (!s.ok())
        return FromRocksDb(s, "storage: cannot build the write batch");
      continue;
    }
    // A put that leaves the due entry where it is still writes it, with the
    // record's mark: for a one-shot job empty, which clears any attempt
    // mark.
    const bool due_unchanged = m.kind() == Mutation::Kind::kPut &&
                               m.previous_due_ms() == m.new_due_ms();
    // An entry removed from a crowd's millisecond stays until the crowd's
    // range deletion.
    if (m.previous_due_ms().has_value() && !due_unchanged &&
        !count_in_crowd(*m.previous_due_ms(), -1)) {
      s = batch.Delete(due_cf_,
                       EncodeDueKey(*m.previous_due_ms(), m.topic(), m.id()));
    }
    if (s.ok() && m.previous_expiry_ms().has_value()) {
      s = batch.Delete(
          expiry_cf_, EncodeDueKey(*m.previous_expiry_ms(), m.topic(), m.id()));
    }
    const std::string key = EncodeJobKey(m.topic(), m.id());
    if (s.ok() && m.kind() == Mutation::Kind::kDelete) {
      s = batch.Delete(jobs_cf_, key);
    } else if (s.ok()) {
      m.record().SerializeToString(&value);
      s = batch.Put(jobs_cf_, key, value);
      if (s.ok() && m.new_due_ms().has_value()) {
        s = batch.Put(due_cf_, EncodeDueKey(*m.new_due_ms(), m.topic(), m.id()),
                      EncodeDueValue(DueValueOf(m.record())));
        if (!due_unchanged) count_in_crowd(*m.new_due_ms(), +1);
      }
      if (s.ok() && m.new_expiry_ms().has_value()) {
        s = batch.Put(expiry_cf_,
                      EncodeDueKey(*m.new_expiry_ms(), m.topic(), m.id()),
                      rocksdb::Slice());
      }
    }
    if (!s.ok()) {  // Only a batch above RocksDB's size limit (4 GiB).
      return FromRocksDb(s, "storage: cannot build the write batch");
    }
  }

  rocksdb::WriteOptions write;
  write.sync = sync;
  write.no_slowdown = durability == Durability::kSyncNoStall;
  s = db_->Write(write, &batch);
  if (write.no_slowdown && s.IsIncomplete()) {
    return WouldStallError();  // nothing written, nothing to remember
  }
  counters_.RecordWrite(s.ok(), sync, mutations.size(), absl::Now() - start);
  if (!s.ok()) {
    absl::Status error =
        FromRocksDb(s, absl::StrCat("storage: write of ", mutations.size(),
                                    " mutations to ", path_, " failed"));
    SetWriteError(error);
    return error;
  }
  // For the syncer; a synced write leaves it be: later unsynced writes of
  // others may already have set it.
  if (!sync) unsynced_.store(true, std::memory_order_relaxed);
  // Only a write that is in counts it: one that failed removed nothing.
  std::vector<int64_t> emptied;
  if (!counts.empty()) {
    absl::MutexLock lock(&crowd_mu_);
    for (const auto& [ms, n] : counts) {
      auto it = crowds_.find(ms);
      if (it == crowds_.end()) continue;
      Crowd& crowd = it->second;
      crowd.live += n;
      if (crowd.counted && crowd.live == 0 && !crowd.releasing) {
        crowd.releasing = true;
        emptied.push_back(ms);
      }
    }
  }
  for (int64_t ms : emptied) ReleaseCrowd(ms);
  return absl::OkStatus();
}

void RocksDbJobStore::SetWriteError(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  if (write_error_.ok()) {
    write_error_ = absl::Status(
        error.code(),
        absl::StrCat("storage: writes are refused until Resume() succeeds or "
                     "the store is reopened, after: ",
                     error.message()));
    write_failed_.store(true, std::memory_order_release);
  }
}

absl::Status RocksDbJobStore::VerifyPreviousDue(
    std::span<const Mutation> mutations) const {
  std::vector<JobKeyView> keys;
  keys.reserve(mutations.size());
  for (const Mutation& m : mutations) keys.push_back(m.key());
  absl::StatusOr<std::vector<std::optional<JobRecord>>> stored = MultiGet(keys);
  if (!stored.ok()) return stored.status();
  for (size_t i = 0; i < mutations.size(); ++i) {
    if (absl::Status s = CheckPreviousDue(mutations[i], (*stored)[i]);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status RocksDbJobStore::Resume() {
  absl::MutexLock lock(&mu_);
  if (write_error_.ok()) return absl::OkStatus();
  const rocksdb::Status s = db_->Resume();
  if (!s.ok()) {
    return FromRocksDb(
        s, absl::StrCat("storage: cannot resume writes to ", path_, " (",
                        write_error_.message(), "); reopen the store"));
  }
  write_error_ = absl::OkStatus();
  write_failed_.store(false, std::memory_order_release);
  return absl::OkStatus();
}

std::optional<std::string> RocksDbJobStore::GetProperty(
    std::string_view column_family, const std::string& name) const {
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  if (column_family == kJobsColumnFamily) {
    cf = jobs_cf_;
  } else if (column_family == kDueColumnFamily) {
    cf = due_cf_;
  } else if (column_family == kExpiryColumnFamily) {
    cf = expiry_cf_;
  } else if (column_family == rocksdb::kDefaultColumnFamilyName) {
    cf = db_->DefaultColumnFamily();
  } else {
    return std::nullopt;
  }
  std::string value;
  if (!db_->GetProperty(cf, name, &value)) return std::nullopt;
  return value;
}

}  // namespace delayd::storage
