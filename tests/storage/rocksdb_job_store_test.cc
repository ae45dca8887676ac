// RocksDbJobStore beyond the shared contract: what Open creates and what it
// refuses, sync modes and counters. Faults: rocksdb_fault_test.cc.
#include "storage/rocksdb_job_store.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::MakeRecord;
using ::delayd::storage::testing::RawDelete;
using ::delayd::storage::testing::RawPut;
using ::delayd::storage::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

absl::StatusOr<std::unique_ptr<RocksDbJobStore>> OpenAt(
    const std::string& path) {
  return RocksDbJobStore::Open(path, RocksDbJobStore::Options());
}

void PutOne(JobStore& store, const std::string& id) {
  const Mutation m = Mutation::Put(MakeRecord("t", id, 1), std::nullopt);
  ASSERT_OK(store.Apply({&m, 1}, Durability::kSync));
}

TEST(RocksDbJobStoreTest, CreatesColumnFamiliesAndMetaRecord) {
  TempDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    PutOne(*store, "a");
    ASSERT_OK(store->Close());
  }
  std::vector<std::string> names;
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.path(), &names)
          .ok());
  EXPECT_THAT(names, UnorderedElementsAre("default", "jobs", "due", "expiry"));

  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.path(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), kMetaKey, &value).ok());
  StoreMeta meta;
  ASSERT_TRUE(meta.ParseFromString(value));
  EXPECT_EQ(meta.layout_version(), kStoreLayoutVersion);
}

TEST(RocksDbJobStoreTest, RefusesANewerLayoutVersion) {
  TempDir dir;
  { ASSERT_OK(OpenAt(dir.path())); }
  StoreMeta meta;
  meta.set_layout_version(kStoreLayoutVersion + 1);
  ASSERT_OK(RawPut(dir.path(), "default", kMetaKey, meta.SerializeAsString()));
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store = OpenAt(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      store.status().message(),
      HasSubstr(absl::StrCat("layout version ", kStoreLayoutVersion + 1)));
  EXPECT_THAT(store.status().message(), HasSubstr(dir.path()));
}

// Writes, with a plain RocksDB, what a layout-1 delayd left: column
// families default, jobs and due, meta version 1, one SCHEDULED job due at
// 5000 (record and due entry). With `expiry_created`, also an empty
// `expiry` column family (a migration that stopped before its last step).
void MakeLayout1Store(const std::string& path, bool expiry_created) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {"jobs", {}}, {"due", {}}};
  if (expiry_created) cfs.push_back({"expiry", {}});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  StoreMeta meta;
  meta.set_layout_version(1);
  JobRecord record = MakeRecord("t", "old", 5000);
  record.set_format_version(1);
  EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], kMetaKey,
                      meta.SerializeAsString())
                  .ok());
  EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[1],
                      EncodeJobKey("t", "old"), record.SerializeAsString())
                  .ok());
  EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[2],
                      EncodeDueKey(5000, "t", "old"), "")
                  .ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  EXPECT_TRUE(db->Close().ok());
}

uint32_t LayoutVersionAt(const std::string& path) {
  rocksdb::DB* raw = nullptr;
  EXPECT_TRUE(
      rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), kMetaKey, &value).ok());
  StoreMeta meta;
  EXPECT_TRUE(meta.ParseFromString(value));
  return meta.layout_version();
}

TEST(RocksDbJobStoreTest, MigratesALayout1Store) {
  for (const bool expiry_created : {false, true}) {
    SCOPED_TRACE(expiry_created ? "expiry created already" : "plain layout 1");
    TempDir dir;
    ASSERT_NO_FATAL_FAILURE(MakeLayout1Store(dir.path(), expiry_created));
    {
      ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
      // The old job is there, due as before.
      ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> old,
                           store->Get("t", "old"));
      ASSERT_TRUE(old.has_value());
      int due = 0;
      ASSERT_OK(store->ScanDue(0, INT64_MAX, [&](int64_t ms, auto, auto) {
        EXPECT_EQ(ms, 5000);
        return ++due > 0;
      }));
      EXPECT_EQ(due, 1);
      // And retained records can be written.
      JobRecord done = *old;
      done.mutable_job()->set_state(v1::JOB_STATE_DONE);
      done.set_expires_at_ms(9000);
      const Mutation m = Mutation::Put(done, 5000);
      ASSERT_OK(store->Apply({&m, 1}, Durability::kSync));
      ASSERT_OK(store->Close());
    }
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(),
                                                dir.path(), &names)
                    .ok());
    EXPECT_THAT(names,
                UnorderedElementsAre("default", "jobs", "due", "expiry"));
    EXPECT_EQ(LayoutVersionAt(dir.path()), kStoreLayoutVersion);
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    int expiring = 0;
    ASSERT_OK(store->ScanExpiry(0, INT64_MAX, [&](int64_t ms, auto, auto) {
      EXPECT_EQ(ms, 9000);
      return ++expiring > 0;
    }));
    EXPECT_EQ(expiring, 1);
  }
}

// Turns the store at `path` into what a layout-5 delayd left: every due
// value without its payload size (the mark alone), meta version 5.
void MakeLayout5(const std::string& path) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, {}},
      {"jobs", {}},
      {"due", {}},
      {"expiry", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions(), handles[2]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    ASSERT_OK_AND_ASSIGN(DueValue value,
                         DecodeDueValue(key, it->value().ToString()));
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[2], key,
                        EncodeDueValue({value.mark, 0}))
                    .ok());
  }
  ASSERT_TRUE(it->status().ok());
  it.reset();
  StoreMeta meta;
  meta.set_layout_version(5);
  EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], kMetaKey,
                      meta.SerializeAsString())
                  .ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  EXPECT_TRUE(db->Close().ok());
}

// Layout 6 adds the payload size to every due entry: Open reads each
// record of a layout-5 store, in chunks, and writes its size beside the
// entry's mark.
TEST(RocksDbJobStoreTest, MigratesALayout5StoreByAddingPayloadSizes) {
  TempDir dir;
  constexpr int kJobs = 2500;  // more than two chunks of 1024
  const auto payload_of = [](int i) { return std::string(i % 37, 'p'); };
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    std::vector<Mutation> batch;
    for (int i = 0; i < kJobs; ++i) {
      JobRecord record = MakeRecord("t", absl::StrCat("j", i), 1000 + i,
                                    v1::JOB_STATE_SCHEDULED, payload_of(i));
      if (i % 100 == 0) record.mutable_job()->mutable_recurring();
      batch.push_back(Mutation::Put(std::move(record), std::nullopt));
    }
    ASSERT_OK(store->Apply(batch, Durability::kSync));
    const Mutation mark =
        Mutation::MarkAttempt("t", "j7", 1007, 3, payload_of(7).size());
    ASSERT_OK(store->Apply({&mark, 1}, Durability::kSync));
    ASSERT_OK(store->Close());
  }
  ASSERT_NO_FATAL_FAILURE(MakeLayout5(dir.path()));
  ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
  EXPECT_EQ(LayoutVersionAt(dir.path()), kStoreLayoutVersion);
  int seen = 0;
  ASSERT_OK(store->ScanDueMarked(
      0, INT64_MAX,
      [&](int64_t due_ms, std::string_view, std::string_view id,
          const DueValue& value) {
        const int i = static_cast<int>(due_ms - 1000);
        EXPECT_EQ(id, absl::StrCat("j", i));
        EXPECT_EQ(value.payload_bytes, payload_of(i).size()) << id;
        const uint32_t mark = i == 7 ? 3 : (i % 100 == 0 ? kRecurringMark : 0);
        EXPECT_EQ(value.mark, mark) << id;
        ++seen;
        return true;
      }));
  EXPECT_EQ(seen, kJobs);
}

TEST(RocksDbJobStoreTest, RefusesACorruptMetaRecord) {
  TempDir dir;
  { ASSERT_OK(OpenAt(dir.path())); }
  ASSERT_OK(RawPut(dir.path(), "default", kMetaKey, "\xff\xff\xff"));
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store = OpenAt(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("corrupt meta record"));
}

TEST(RocksDbJobStoreTest, RefusesJobsWithoutAMetaRecord) {
  TempDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    PutOne(*store, "a");
  }
  ASSERT_OK(RawDelete(dir.path(), "default", kMetaKey));
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store = OpenAt(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("no meta record"));
}

TEST(RocksDbJobStoreTest, AdoptsAnEmptyStoreWithoutMetaRecord) {
  TempDir dir;
  { ASSERT_OK(OpenAt(dir.path())); }
  ASSERT_OK(RawDelete(dir.path(), "default", kMetaKey));
  EXPECT_OK(OpenAt(dir.path()));
}

TEST(RocksDbJobStoreTest, RefusesAnUnreadableDatabase) {
  TempDir dir;
  { ASSERT_OK(OpenAt(dir.path())); }
  std::ofstream(dir.path() + "/CURRENT", std::ios::trunc)
      << "MANIFEST-999999\n";
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store = OpenAt(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("storage: cannot open RocksDB at " + dir.path()));
}

TEST(RocksDbJobStoreTest, RefusesAForeignDatabase) {
  TempDir dir;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.path(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "v").ok());
  }
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store = OpenAt(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("storage: cannot open RocksDB at " + dir.path()));
  EXPECT_THAT(store.status().message(), HasSubstr("jobs"));
}

TEST(RocksDbJobStoreTest, RefusesADatabaseOpenElsewhere) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto first, OpenAt(dir.path()));
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> second = OpenAt(dir.path());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable)
      << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("LOCK"));
}

TEST(RocksDbJobStoreTest, SyncModeDecidesWhichWritesAreSynced) {
  TempDir dir;
  {
    RocksDbJobStore::Options only_ksync;
    only_ksync.max_unsynced_age = absl::InfiniteDuration();
    ASSERT_OK_AND_ASSIGN(auto store,
                         RocksDbJobStore::Open(dir.path(), only_ksync));
    const Mutation m = Mutation::Put(MakeRecord("t", "a", 1), std::nullopt);
    ASSERT_OK(store->Apply({&m, 1}, Durability::kSync));
    const Mutation n = Mutation::Put(MakeRecord("t", "a", 2), 1);
    ASSERT_OK(store->Apply({&n, 1}, Durability::kNoSync));
    const StoreStats stats = store->stats();
    EXPECT_EQ(stats.writes, 2u);
    EXPECT_EQ(stats.synced_writes, 1u);
    EXPECT_EQ(stats.write_failures, 0u);
    EXPECT_EQ(stats.mutations_written, 2u);
    const std::optional<std::string> dbstats =
        store->GetProperty("default", "rocksdb.dbstats");
    ASSERT_TRUE(dbstats.has_value());
    // The meta record and the kSync Apply are synced, the kNoSync one not.
    EXPECT_THAT(*dbstats, HasSubstr("Cumulative WAL: 3 writes, 2 syncs"))
        << *dbstats;
    EXPECT_TRUE(store->GetProperty("jobs", "rocksdb.estimate-num-keys"));
    EXPECT_EQ(store->GetProperty("nope", "rocksdb.estimate-num-keys"),
              std::nullopt);
  }
  RocksDbJobStore::Options none;
  none.sync_mode = SyncMode::kNone;
  ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), none));
  const Mutation m = Mutation::Put(MakeRecord("t", "b", 1), std::nullopt);
  ASSERT_OK(store->Apply({&m, 1}, Durability::kSync));
  EXPECT_EQ(store->stats().synced_writes, 0u);
  EXPECT_OK(store->Get("t", "a"));
}

// The bound on what a power loss costs: kNoSync writes are synced within
// max_unsynced_age, by a background thread (or at once, for zero).
TEST(RocksDbJobStoreTest, UnsyncedWritesAreSyncedWithinTheirMaxAge) {
  TempDir dir;
  const Mutation a = Mutation::Put(MakeRecord("t", "a", 1), std::nullopt);
  const Mutation b = Mutation::Put(MakeRecord("t", "b", 1), std::nullopt);
  const Mutation c = Mutation::Put(MakeRecord("t", "c", 1), std::nullopt);
  {
    RocksDbJobStore::Options always;
    always.max_unsynced_age = absl::ZeroDuration();
    ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), always));
    ASSERT_OK(store->Apply({&a, 1}, Durability::kNoSync));
    ASSERT_OK(store->Apply({&b, 1}, Durability::kNoSync));
    EXPECT_EQ(store->stats().synced_writes, 2u);
    EXPECT_EQ(store->background_wal_syncs(), 0u);
  }
  {
    RocksDbJobStore::Options age;
    age.max_unsynced_age = absl::Milliseconds(20);
    ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), age));
    // Nothing unsynced: nothing to sync.
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(store->background_wal_syncs(), 0u);
    ASSERT_OK(store->Apply({&c, 1}, Durability::kNoSync));
    EXPECT_EQ(store->stats().synced_writes, 0u);  // the writer did not wait
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (store->background_wal_syncs() == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(store->background_wal_syncs(), 1u);
    ASSERT_OK(store->Close());
  }
  RocksDbJobStore::Options none;
  none.sync_mode = SyncMode::kNone;
  none.max_unsynced_age = absl::ZeroDuration();
  ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), none));
  const Mutation d = Mutation::Put(MakeRecord("t", "d", 1), std::nullopt);
  ASSERT_OK(store->Apply({&d, 1}, Durability::kNoSync));
  EXPECT_EQ(store->stats().synced_writes, 0u);
  EXPECT_EQ(store->background_wal_syncs(), 0u);
}

// kSyncNoStall is kSync for a caller that must not wait: synced like kSync
// under kAlways; refused at once with WouldStallError(), writing nothing,
// where a write would wait out a stall (here: table files piling up with
// compactions off, small memtables); and the store still takes writes.
TEST(RocksDbJobStoreTest, ANoStallWriteIsRefusedInsteadOfWaiting) {
  TempDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    const Mutation m = Mutation::Put(MakeRecord("t", "a", 1), std::nullopt);
    ASSERT_OK(store->Apply({&m, 1}, Durability::kSyncNoStall));
    EXPECT_EQ(store->stats().synced_writes, 1u);
  }
  RocksDbJobStore::Options options;
  options.sync_mode = SyncMode::kNone;
  options.defer_auto_compactions = true;
  options.jobs_write_buffer_bytes = 64 << 10;
  options.due_write_buffer_bytes = 64 << 10;
  ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), options));
  const std::string payload(1000, 'p');
  absl::Status refused;
  int written = 0;
  for (; written < 1'000'000 && refused.ok(); ++written) {
    std::vector<Mutation> batch;
    for (int k = 0; k < 10; ++k) {
      JobRecord r = MakeRecord("t", absl::StrCat("j", written, "-", k), 1);
      r.mutable_job()->set_payload(payload);
      batch.push_back(Mutation::Put(std::move(r), std::nullopt));
    }
    refused = store->Apply(batch, Durability::kSyncNoStall);
  }
  ASSERT_FALSE(refused.ok()) << "no stall after " << written << " writes";
  EXPECT_TRUE(IsWouldStall(refused)) << refused;
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(IsWouldStall(absl::UnavailableError("another")));
  const int last = written - 1;  // the refused batch
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> none,
                       store->Get("t", absl::StrCat("j", last, "-0")));
  EXPECT_FALSE(none.has_value());
  EXPECT_EQ(store->stats().write_failures, 0u);
  // Not sticky: with compactions on again, a write that may wait succeeds.
  ASSERT_OK(store->EnableAutoCompactions());
  const Mutation after =
      Mutation::Put(MakeRecord("t", "after", 1), std::nullopt);
  ASSERT_OK(store->Apply({&after, 1}, Durability::kSync));
  EXPECT_OK(store->Get("t", "after"));
}

TEST(RocksDbJobStoreTest, DeferredCompactionsCanBeEnabled) {
  TempDir dir;
  RocksDbJobStore::Options options;
  options.defer_auto_compactions = true;
  ASSERT_OK_AND_ASSIGN(auto store, RocksDbJobStore::Open(dir.path(), options));
  PutOne(*store, "a");
  ASSERT_OK(store->EnableAutoCompactions());
  ASSERT_OK(store->EnableAutoCompactions());
  PutOne(*store, "b");
  EXPECT_OK(store->Get("t", "b"));
}

TEST(RocksDbJobStoreTest, EmptyApplyWritesNothing) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
  ASSERT_OK(store->Apply({}, Durability::kSync));
  EXPECT_EQ(store->stats().writes, 0u);
}

// The fire path's scans (ScanFireMillisecond, ScanDueFrom) keep the blocks
// they read in the block cache, since it reads them again at once; the
// long scans (ScanDue, ScanDueMarked, ScanExpiry) leave the cache alone.
TEST(RocksDbJobStoreTest, OnlyTheFirePathsScansFillTheBlockCache) {
  TempDir dir;
  constexpr int64_t kDue = 1'700'000'000'123;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
    std::vector<Mutation> batch;
    for (int i = 0; i < 5000; ++i) {
      batch.push_back(
          Mutation::Put(MakeRecord("t", absl::StrCat("job-", i), kDue + i % 2),
                        std::nullopt));
    }
    ASSERT_OK(store->Apply(batch, Durability::kSync));
    ASSERT_OK(store->Close());  // flushes: the scans below read table files
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenAt(dir.path()));
  const auto cache_bytes = [&] {
    const std::optional<std::string> usage =
        store->GetProperty("due", "rocksdb.block-cache-usage");
    EXPECT_TRUE(usage.has_value());
    return usage ? std::stoull(*usage) : 0;
  };
  int seen = 0;
  const auto count = [&](int64_t, std::string_view, std::string_view) {
    ++seen;
    return true;
  };
  const auto count_marked = [&](int64_t, std::string_view, std::string_view,
                                const DueValue&) {
    ++seen;
    return true;
  };

  const uint64_t before = cache_bytes();
  ASSERT_OK(store->ScanDue(0, INT64_MAX, count));
  ASSERT_OK(store->ScanDueMarked(0, INT64_MAX, count_marked));
  ASSERT_OK(store->ScanDue(kDue, kDue + 1, count));  // one ms, all the same
  EXPECT_EQ(seen, 5000 + 5000 + 2500);
  EXPECT_EQ(cache_bytes(), before);

  seen = 0;
  ASSERT_OK(store->ScanFireMillisecond(kDue, count));
  EXPECT_EQ(seen, 2500);
  const uint64_t after_fire_scan = cache_bytes();
  EXPECT_GT(after_fire_scan, before);

  seen = 0;
  ASSERT_OK(store->ScanDueFrom(kDue + 1, "t", "", kDue + 2, count_marked));
  EXPECT_EQ(seen, 2500);
  EXPECT_GT(cache_bytes(), after_fire_scan);
}

}  // namespace
}  // namespace delayd::storage
