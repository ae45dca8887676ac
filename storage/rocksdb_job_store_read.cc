// RocksDbJobStore's reads: records by key (Get, and MultiGet with its walk
// in key order) and the scans of the indexes, topics and jobs. The crowds
// are in rocksdb_job_store_crowds.cc, the rest of the class (open, writes,
// migration, close) in rocksdb_job_store.cc.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/snapshot.h"
#include "storage/rocksdb_job_store.h"
#include "storage/rocksdb_options.h"
#include "storage/rocksdb_status.h"

namespace delayd::storage {

absl::StatusOr<std::optional<JobRecord>> RocksDbJobStore::Get(
    std::string_view topic, std::string_view id) const {
  const std::string key = EncodeJobKey(topic, id);
  rocksdb::PinnableSlice value;
  const rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), jobs_cf_, key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    return FromRocksDb(s, absl::StrCat("storage: read of key \"",
                                       PrintableKey(key), "\" failed"));
  }
  absl::StatusOr<JobRecord> record =
      ParseJobRecord({topic, id}, value.ToStringView());
  if (!record.ok()) return record.status();
  return std::optional<JobRecord>(*std::move(record));
}

absl::StatusOr<std::vector<std::optional<JobRecord>>> RocksDbJobStore::MultiGet(
    std::span<const JobKeyView> keys) const {
  const size_t n = keys.size();
  std::vector<std::string> encoded(n);
  for (size_t i = 0; i < n; ++i) {
    encoded[i] = EncodeJobKey(keys[i].topic, keys[i].id);
  }
  std::vector<std::optional<JobRecord>> out(n);
  // The keys left to RocksDB's MultiGet: all of a small batch, or those the
  // walk below gave up on. Both read one snapshot, as one MultiGet would.
  std::vector<size_t> rest;
  rocksdb::ReadOptions read;
  std::optional<rocksdb::ManagedSnapshot> snapshot;
  if (n >= kWalkMinKeys) {
    read.snapshot = snapshot.emplace(db_.get()).snapshot();
    absl::Status walked = WalkRead(read, keys, encoded, out, rest);
    if (!walked.ok()) return walked;
  } else {
    rest.resize(n);
    for (size_t i = 0; i < n; ++i) rest[i] = i;
  }
  if (rest.empty()) return out;
  const size_t m = rest.size();
  std::vector<rocksdb::Slice> slices(m);
  for (size_t k = 0; k < m; ++k) slices[k] = encoded[rest[k]];
  std::vector<rocksdb::PinnableSlice> values(m);
  std::vector<rocksdb::Status> statuses(m);
  db_->MultiGet(read, jobs_cf_, m, slices.data(), values.data(),
                statuses.data());
  for (size_t k = 0; k < m; ++k) {
    const size_t i = rest[k];
    if (statuses[k].IsNotFound()) continue;
    if (!statuses[k].ok()) {
      return FromRocksDb(statuses[k],
                         absl::StrCat("storage: read of key \"",
                                      PrintableKey(encoded[i]), "\" failed"));
    }
    absl::StatusOr<JobRecord> record =
        ParseJobRecord(keys[i], values[k].ToStringView());
    if (!record.ok()) return record.status();
    out[i] = *std::move(record);
  }
  return out;
}

absl::Status RocksDbJobStore::WalkRead(
    const rocksdb::ReadOptions& read, std::span<const JobKeyView> keys,
    const std::vector<std::string>& encoded,
    std::vector<std::optional<JobRecord>>& out,
    std::vector<size_t>& rest) const {
  const size_t n = keys.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return encoded[a] < encoded[b]; });
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, jobs_cf_));
  size_t seeks = 1;
  it->Seek(encoded[order[0]]);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    const rocksdb::Slice key = encoded[i];
    // The iterator is at the first key >= the previous one: step to this
    // one, or seek when it lies further on.
    for (int step = 0; it->Valid() && it->key().compare(key) < 0; ++step) {
      if (step == kWalkMaxSteps) {
        // More than one seek per kWalkKeysPerSeek keys read (and a couple
        // of gaps): the keys are not neighbours.
        if (seeks >= 2 + k / kWalkKeysPerSeek) {
          rest.assign(order.begin() + static_cast<ptrdiff_t>(k), order.end());
          return absl::OkStatus();
        }
        ++seeks;
        it->Seek(key);
        break;
      }
      it->Next();
    }
    if (!it->Valid()) {
      if (!it->status().ok()) {
        return FromRocksDb(it->status(),
                           absl::StrCat("storage: read of key \"",
                                        PrintableKey(encoded[i]), "\" failed"));
      }
      return absl::OkStatus();  // past the last record: the rest are gone
    }
    if (it->key() != key) continue;  // no such record
    absl::StatusOr<JobRecord> record =
        ParseJobRecord(keys[i], it->value().ToStringView());
    if (!record.ok()) return record.status();
    out[i] = *std::move(record);
  }
  return absl::OkStatus();
}

namespace {

// A DueVisitor as a MarkedDueVisitor that ignores the mark.
auto IgnoringMarks(JobStore::DueVisitor visitor) {
  return [visitor](int64_t due_ms, std::string_view topic, std::string_view id,
                   const DueValue&) { return visitor(due_ms, topic, id); };
}

}  // namespace

absl::StatusOr<std::vector<std::optional<JobRecord>>>
RocksDbJobStore::RecordsOfDueKeys(const std::vector<std::string>& keys) const {
  std::vector<JobKeyView> jobs;
  jobs.reserve(keys.size());
  for (const std::string& key : keys) {
    absl::StatusOr<DueKeyView> due = DecodeDueKey(key);
    if (!due.ok()) return due.status();
    jobs.push_back({due->topic, due->id});
  }
  return MultiGet(jobs);
}

absl::Status RocksDbJobStore::ScanDue(int64_t from_ms, int64_t to_ms,
                                      DueVisitor visitor) const {
  return ScanIndex(due_cf_, DueScanReadOptions(), from_ms, to_ms,
                   IgnoringMarks(visitor));
}

absl::Status RocksDbJobStore::ScanFireMillisecond(int64_t ms,
                                                  DueVisitor visitor) {
  if (absl::Status s = CountFailedCrowd(ms); !s.ok()) return s;
  return ScanIndex(due_cf_, FireScanReadOptions(), ms, EndOfMs(ms),
                   IgnoringMarks(visitor));
}

absl::Status RocksDbJobStore::ScanDueFrom(int64_t from_ms,
                                          std::string_view from_topic,
                                          std::string_view from_id,
                                          int64_t to_ms,
                                          MarkedDueVisitor visitor) const {
  return ScanIndex(due_cf_, FireScanReadOptions(), from_ms, to_ms, visitor,
                   EncodeDueKey(from_ms, from_topic, from_id), true);
}

absl::Status RocksDbJobStore::ScanDueMarked(int64_t from_ms, int64_t to_ms,
                                            MarkedDueVisitor visitor) const {
  return ScanIndex(due_cf_, DueScanReadOptions(), from_ms, to_ms, visitor, {},
                   true);
}

absl::Status RocksDbJobStore::ScanExpiry(int64_t from_ms, int64_t to_ms,
                                         DueVisitor visitor) const {
  return ScanIndex(expiry_cf_, DueScanReadOptions(), from_ms, to_ms,
                   IgnoringMarks(visitor));
}

absl::Status RocksDbJobStore::ScanIndex(rocksdb::ColumnFamilyHandle* cf,
                                        const rocksdb::ReadOptions& base,
                                        int64_t from_ms, int64_t to_ms,
                                        MarkedDueVisitor visitor,
                                        std::string_view start,
                                        bool marks) const {
  if (ClampDueMs(from_ms) >= ClampDueMs(to_ms)) return absl::OkStatus();
  const std::string lower = EncodeDueTime(from_ms);
  const std::string upper = EncodeDueTime(to_ms);
  const rocksdb::Slice lower_slice(lower);
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read = base;
  read.iterate_lower_bound = &lower_slice;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, cf));
  for (it->Seek(start.empty() ? lower_slice : rocksdb::Slice(start));
       it->Valid(); it->Next()) {
    absl::StatusOr<DueKeyView> due = DecodeDueKey(it->key().ToStringView());
    if (!due.ok()) return due.status();
    DueValue value;
    if (marks) {
      absl::StatusOr<DueValue> decoded =
          DecodeDueValue(it->key().ToStringView(), it->value().ToStringView());
      if (!decoded.ok()) return decoded.status();
      value = *decoded;
    }
    if (!visitor(due->due_ms, due->topic, due->id, value)) {
      return absl::OkStatus();
    }
  }
  return FromRocksDb(it->status(), absl::StrCat("storage: ", cf->GetName(),
                                                " index scan failed"));
}

absl::Status RocksDbJobStore::ScanJobs(std::string_view topic,
                                       std::string_view id_prefix,
                                       std::string_view start_after_id,
                                       JobVisitor visitor) const {
  const KeyRange range = JobScanRange(topic, id_prefix, start_after_id);
  if (range.begin >= range.end) return absl::OkStatus();
  const rocksdb::Slice upper(range.end);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, jobs_cf_));
  for (it->Seek(rocksdb::Slice(range.begin)); it->Valid(); it->Next()) {
    absl::StatusOr<JobKeyView> key = DecodeJobKey(it->key().ToStringView());
    if (!key.ok()) return key.status();
    absl::StatusOr<JobRecord> record =
        ParseJobRecord(*key, it->value().ToStringView());
    if (!record.ok()) return record.status();
    if (!visitor(*record)) return absl::OkStatus();
  }
  return FromRocksDb(it->status(), "storage: job scan failed");
}

absl::Status RocksDbJobStore::ScanTopics(TopicVisitor visitor) const {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), jobs_cf_));
  it->SeekToFirst();
  while (it->Valid()) {
    absl::StatusOr<JobKeyView> key = DecodeJobKey(it->key().ToStringView());
    if (!key.ok()) return key.status();
    const std::string topic(key->topic);
    if (!visitor(topic)) return absl::OkStatus();
    // Every key of the topic starts with `topic \0`: jump past them.
    it->Seek(PrefixSuccessor(EncodeJobKey(topic, "")));
  }
  return FromRocksDb(it->status(), "storage: topic scan failed");
}

}  // namespace delayd::storage
