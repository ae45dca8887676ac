// RocksDbJobStore's crowds (ScanCrowd): the due entries that writes remove
// from a crowd's millisecond stay until one range deletion takes them all,
// with the last; an entry added there meanwhile outlives it; writes made
// while the crowd is scanned are counted; Open clears what a crash left;
// a note or a release that cannot be written (FaultInjectingFileSystem)
// leaves nothing that Open does not clear, and a scan that cannot be read
// is counted by the next.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/fault_injecting_file_system.h"
#include "storage/rocksdb_job_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::MakeRecord;
using ::delayd::storage::testing::MustOpenRocksDb;
using ::delayd::storage::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kMs = 1'000'000;

void Write(JobStore& store, const Mutation& m) {
  ASSERT_OK(store.Apply({&m, 1}, Durability::kNoSync));
}

void Add(JobStore& store, const std::string& id, int64_t ms) {
  Write(store, Mutation::Put(MakeRecord("t", id, ms), std::nullopt));
}

void Remove(JobStore& store, const std::string& id, int64_t ms) {
  Write(store, Mutation::Delete("t", id, ms));
}

// The ids of the entries of millisecond `ms`, in key order.
std::vector<std::string> DueAt(const JobStore& store, int64_t ms) {
  std::vector<std::string> ids;
  EXPECT_OK(store.ScanDue(ms, ms + 1,
                          [&](int64_t, std::string_view, std::string_view id) {
                            ids.emplace_back(id);
                            return true;
                          }));
  return ids;
}

// The ids ScanCrowd visits.
std::vector<std::string> ScanCrowd(JobStore& store, int64_t ms) {
  std::vector<std::string> ids;
  EXPECT_OK(store.ScanCrowd(
      ms, [&](int64_t due_ms, std::string_view, std::string_view id) {
        EXPECT_EQ(due_ms, ms);
        ids.emplace_back(id);
        return true;
      }));
  return ids;
}

TEST(RocksDbCrowdTest, RemovedEntriesStayUntilTheLastGoesThenAllGoAtOnce) {
  TempDir dir;
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  for (const char* id : {"a", "b", "c"}) Add(*store, id, kMs);
  EXPECT_THAT(ScanCrowd(*store, kMs), ElementsAre("a", "b", "c"));
  EXPECT_EQ(store->crowds(), 1u);
  // A second scan of an open crowd reads it again, and counts nothing.
  EXPECT_THAT(ScanCrowd(*store, kMs), ElementsAre("a", "b", "c"));
  Remove(*store, "a", kMs);
  Remove(*store, "b", kMs);
  EXPECT_THAT(DueAt(*store, kMs), ElementsAre("a", "b", "c"));
  EXPECT_EQ(store->crowds(), 1u);
  Remove(*store, "c", kMs);
  EXPECT_EQ(store->crowds(), 0u);
  EXPECT_THAT(DueAt(*store, kMs), IsEmpty());
  // No longer a crowd: a removal deletes its entry at once.
  Add(*store, "d", kMs);
  Add(*store, "e", kMs);
  Remove(*store, "d", kMs);
  EXPECT_THAT(DueAt(*store, kMs), ElementsAre("e"));
}

TEST(RocksDbCrowdTest, AJobMovedOutLeavesAStaleEntryUntilTheCrowdEnds) {
  TempDir dir;
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  Add(*store, "a", kMs);
  Add(*store, "b", kMs);
  ScanCrowd(*store, kMs);
  Write(*store, Mutation::Put(MakeRecord("t", "a", kMs + 5000), kMs));
  EXPECT_THAT(DueAt(*store, kMs), ElementsAre("a", "b"));
  EXPECT_THAT(DueAt(*store, kMs + 5000), ElementsAre("a"));
  Remove(*store, "b", kMs);
  EXPECT_EQ(store->crowds(), 0u);
  EXPECT_THAT(DueAt(*store, kMs), IsEmpty());
  EXPECT_THAT(DueAt(*store, kMs + 5000), ElementsAre("a"));
}

TEST(RocksDbCrowdTest, AnEntryAddedIntoTheCrowdOutlivesItsRangeDeletion) {
  TempDir dir;
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  Add(*store, "a", kMs);
  Add(*store, "b", kMs);
  ScanCrowd(*store, kMs);
  Remove(*store, "a", kMs);
  Add(*store, "late", kMs);  // e.g. scheduled with a fire_at just past
  // Moved in from elsewhere, as a Reschedule does.
  Add(*store, "moved", kMs + 9000);
  Write(*store, Mutation::Put(MakeRecord("t", "moved", kMs), kMs + 9000));
  Remove(*store, "b", kMs);
  // The two that came in are still due there: the crowd goes on.
  EXPECT_EQ(store->crowds(), 1u);
  EXPECT_THAT(DueAt(*store, kMs), ElementsAre("a", "b", "late", "moved"));
  Remove(*store, "late", kMs);
  EXPECT_EQ(store->crowds(), 1u);
  Remove(*store, "moved", kMs);
  EXPECT_EQ(store->crowds(), 0u);
  EXPECT_THAT(DueAt(*store, kMs), IsEmpty());
  EXPECT_THAT(DueAt(*store, kMs + 9000), IsEmpty());
}

// A herd's first jobs are acked while its later ones are still being
// scanned, and a job may come in meanwhile: the count holds.
TEST(RocksDbCrowdTest, WritesMadeWhileTheCrowdIsScannedAreCounted) {
  TempDir dir;
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  std::vector<Mutation> jobs;
  for (int i = 0; i < 100; ++i) {
    jobs.push_back(Mutation::Put(
        MakeRecord("t", absl::StrCat("j", 100 + i), kMs), std::nullopt));
  }
  ASSERT_OK(store->Apply(jobs, Durability::kSync));
  int visited = 0;
  ASSERT_OK(store->ScanCrowd(
      kMs, [&](int64_t, std::string_view, std::string_view id) {
        Remove(*store, std::string(id), kMs);
        if (++visited == 50) Add(*store, "late", kMs);
        return true;
      }));
  // The scan's snapshot holds the hundred, not the late one.
  EXPECT_EQ(visited, 100);
  EXPECT_EQ(store->crowds(), 1u);
  EXPECT_EQ(DueAt(*store, kMs).size(), 101u);
  Remove(*store, "late", kMs);
  EXPECT_EQ(store->crowds(), 0u);
  EXPECT_THAT(DueAt(*store, kMs), IsEmpty());
}

TEST(RocksDbCrowdTest, ACrowdWithNothingLeftEndsWithItsScan) {
  TempDir dir;
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(ScanCrowd(*store, kMs), IsEmpty());
  EXPECT_EQ(store->crowds(), 0u);
  Add(*store, "a", kMs);
  Add(*store, "b", kMs);
  // The visitor stops at the first entry; the second is counted anyway.
  ASSERT_OK(store->ScanCrowd(
      kMs, [&](int64_t, std::string_view, std::string_view id) {
        EXPECT_EQ(id, "a");
        Remove(*store, "a", kMs);
        Remove(*store, "b", kMs);
        return false;
      }));
  EXPECT_EQ(store->crowds(), 0u);
  EXPECT_THAT(DueAt(*store, kMs), IsEmpty());
}

// A crash (or a close) in the middle of a crowd leaves its stale entries
// and its note; the next Open deletes the entries no record is due at,
// keeps the others with their marks, and drops the note.
TEST(RocksDbCrowdTest, OpenClearsTheStaleEntriesACrowdLeft) {
  TempDir dir;
  {
    auto store = MustOpenRocksDb(dir.path());
    ASSERT_NE(store, nullptr);
    for (const char* id : {"a", "b", "c", "d"}) Add(*store, id, kMs);
    ScanCrowd(*store, kMs);
    Write(*store, Mutation::MarkAttempt("t", "c", kMs, 1, 7));
    Remove(*store, "a", kMs);
    Write(*store, Mutation::Put(MakeRecord("t", "b", kMs + 7), kMs));
    // Acked, then scheduled again with the same id elsewhere.
    Remove(*store, "d", kMs);
    Add(*store, "d", kMs + 8);
    EXPECT_THAT(DueAt(*store, kMs), ElementsAre("a", "b", "c", "d"));
    ASSERT_OK(store->Close());
  }
  auto store = MustOpenRocksDb(dir.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->crowds(), 0u);
  std::vector<std::string> marked;
  ASSERT_OK(store->ScanDueMarked(
      kMs, kMs + 1,
      [&](int64_t, std::string_view, std::string_view id,
          const DueValue& value) {
        marked.push_back(std::string(id) + ":" + std::to_string(value.mark));
        return true;
      }));
  EXPECT_THAT(marked, ElementsAre("c:1"));
  EXPECT_THAT(DueAt(*store, kMs + 7), ElementsAre("b"));
  EXPECT_THAT(DueAt(*store, kMs + 8), ElementsAre("d"));
  ASSERT_OK(store->Close());
  store.reset();

  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.path(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), EncodeCrowdKey(kMs), &value)
                  .IsNotFound());
}

// A store opened over a FaultInjectingFileSystem, with jobs a and b due at
// kMs.
class RocksDbCrowdFaultTest : public ::testing::Test {
 protected:
  RocksDbCrowdFaultTest()
      : fs_(std::make_shared<FaultInjectingFileSystem>(
            rocksdb::FileSystem::Default())),
        env_(NewFaultInjectingEnv(fs_)) {
    OpenFaulty();
    if (store_ == nullptr) return;
    Add(*store_, "a", kMs);
    Add(*store_, "b", kMs);
  }

  // Opens the store over the fault-injecting file system.
  void OpenFaulty() {
    RocksDbJobStore::Options options;
    options.env = env_.get();
    absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store =
        RocksDbJobStore::Open(dir_.path(), options);
    EXPECT_OK(store.status());
    if (store.ok()) store_ = *std::move(store);
  }

  // Closes the store (which flushes it) and opens it again over the
  // fault-injecting file system: what it holds is now read from table
  // files, whose reads ArmReads can make fail.
  void ReopenFaulty() {
    ASSERT_OK(store_->Close());
    store_.reset();
    OpenFaulty();
    ASSERT_NE(store_, nullptr);
  }

  // A ScanCrowd of kMs whose read fails: the crowd is made (its note is
  // written), not counted.
  void FailCrowdScan() {
    ReopenFaulty();
    fs_->ArmReads();
    std::vector<std::string> visited;
    const absl::Status scan = store_->ScanCrowd(
        kMs, [&](int64_t, std::string_view, std::string_view id) {
          visited.emplace_back(id);
          return true;
        });
    fs_->DisarmReads();
    EXPECT_EQ(scan.code(), absl::StatusCode::kUnavailable) << scan;
    EXPECT_GE(fs_->faults_injected(), 1);
    EXPECT_THAT(visited, IsEmpty());
    EXPECT_EQ(store_->crowds(), 1u);
  }

  // Closes the store, and opens it again without faults.
  void Reopen() {
    store_.reset();
    fs_->Disarm();
    store_ = MustOpenRocksDb(dir_.path());
  }

  TempDir dir_;
  std::shared_ptr<FaultInjectingFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<RocksDbJobStore> store_;
};

// The crowd's note cannot be written (a WAL I/O error): no crowd is made,
// the millisecond is scanned as any other, and after a reopen a removal
// deletes its entry at once.
TEST_F(RocksDbCrowdFaultTest, ANoteThatCannotBeWrittenMakesNoCrowd) {
  ASSERT_NE(store_, nullptr);
  fs_->Arm(WalFault::kIoError);
  EXPECT_THAT(ScanCrowd(*store_, kMs), ElementsAre("a", "b"));
  EXPECT_GE(fs_->faults_injected(), 1);
  EXPECT_EQ(store_->crowds(), 0u);
  // The failed write is sticky, as any other.
  const Mutation remove = Mutation::Delete("t", "a", kMs);
  EXPECT_FALSE(store_->Apply({&remove, 1}, Durability::kNoSync).ok());
  Reopen();
  ASSERT_NE(store_, nullptr);
  EXPECT_THAT(DueAt(*store_, kMs), ElementsAre("a", "b"));
  Remove(*store_, "a", kMs);
  EXPECT_THAT(DueAt(*store_, kMs), ElementsAre("b"));
}

// The last removal is written, but the crowd's release (its range deletion
// and the note's delete) is not: the stale entries stay while the store is
// open, and the next Open clears them.
TEST_F(RocksDbCrowdFaultTest, AReleaseThatCannotBeWrittenIsLeftToTheNextOpen) {
  ASSERT_NE(store_, nullptr);
  Add(*store_, "later", kMs + 1);
  EXPECT_THAT(ScanCrowd(*store_, kMs), ElementsAre("a", "b"));
  Remove(*store_, "a", kMs);
  // The next write (b's removal) reaches the WAL; the one after it, the
  // release, fails.
  fs_->Arm(WalFault::kIoError, /*appends_to_skip=*/1);
  Remove(*store_, "b", kMs);
  EXPECT_GE(fs_->faults_injected(), 1);
  EXPECT_EQ(store_->crowds(), 1u);
  EXPECT_THAT(DueAt(*store_, kMs), ElementsAre("a", "b"));
  Reopen();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->crowds(), 0u);
  EXPECT_THAT(DueAt(*store_, kMs), IsEmpty());
  EXPECT_THAT(DueAt(*store_, kMs + 1), ElementsAre("later"));
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> b, store_->Get("t", "b"));
  EXPECT_FALSE(b.has_value());
}

// The crowd's scan cannot read its entries: the crowd is made but not
// counted. The fire path's next try, a ScanCrowd of the same millisecond,
// counts it in the snapshot of the first, where the removal made between
// the two is not, so the crowd ends with its last job.
TEST_F(RocksDbCrowdFaultTest, AScanThatFailsIsCountedByTheNextScanCrowd) {
  ASSERT_NE(store_, nullptr);
  FailCrowdScan();
  Remove(*store_, "a", kMs);
  EXPECT_THAT(ScanCrowd(*store_, kMs), ElementsAre("a", "b"));
  EXPECT_EQ(store_->crowds(), 1u);
  Remove(*store_, "b", kMs);
  EXPECT_EQ(store_->crowds(), 0u);
  EXPECT_THAT(DueAt(*store_, kMs), IsEmpty());
}

// As above, when the next try is a ScanFireMillisecond (the jobs left are
// too few for a crowd): it counts the crowd in the first scan's snapshot,
// and visits the entries there now, among them one added since (counted
// once, by its write).
TEST_F(RocksDbCrowdFaultTest, AScanThatFailsIsCountedByTheNextFireScan) {
  ASSERT_NE(store_, nullptr);
  FailCrowdScan();
  Remove(*store_, "a", kMs);
  Add(*store_, "late", kMs);
  std::vector<std::string> visited;
  ASSERT_OK(store_->ScanFireMillisecond(
      kMs, [&](int64_t, std::string_view, std::string_view id) {
        visited.emplace_back(id);
        return true;
      }));
  // a's entry is stale: it stays until the crowd ends.
  EXPECT_THAT(visited, ElementsAre("a", "b", "late"));
  Remove(*store_, "b", kMs);
  EXPECT_EQ(store_->crowds(), 1u);
  Remove(*store_, "late", kMs);
  EXPECT_EQ(store_->crowds(), 0u);
  EXPECT_THAT(DueAt(*store_, kMs), IsEmpty());
}

// A crowd still not counted when the store closes (the snapshot it keeps
// does not stop the close) is cleared by the next Open.
TEST_F(RocksDbCrowdFaultTest, ACrowdNeverCountedIsLeftToTheNextOpen) {
  ASSERT_NE(store_, nullptr);
  FailCrowdScan();
  Remove(*store_, "a", kMs);
  ASSERT_OK(store_->Close());
  store_ = MustOpenRocksDb(dir_.path());
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->crowds(), 0u);
  EXPECT_THAT(DueAt(*store_, kMs), ElementsAre("b"));
}

}  // namespace
}  // namespace delayd::storage
