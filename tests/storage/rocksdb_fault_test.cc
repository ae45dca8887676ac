// RocksDbJobStore under injected WAL faults (FaultInjectingFileSystem): a
// failed write is reported with the right code, is sticky, leaves reads
// working, and — judged by reopening the database from what actually reached
// the files — every batch is either wholly present or wholly absent, and
// every acknowledged batch is present.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "storage/fault_injecting_file_system.h"
#include "storage/in_memory_job_store.h"
#include "storage/rocksdb_job_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::Dump;
using ::delayd::storage::testing::ExpectDueIndexConsistent;
using ::delayd::storage::testing::MakeRecord;
using ::delayd::storage::testing::StoreDump;
using ::delayd::storage::testing::TempDir;
using ::testing::AnyOf;
using ::testing::Eq;

struct FaultCase {
  const char* name;
  WalFault fault;
  absl::StatusCode code;
  // Whether the failed batch may be found after reopening: only when its
  // bytes reached the file whole and just the fsync failed.
  bool may_survive;
  // Whether Resume() brings writes back once the fault is gone.
  bool resumable;
};

void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

class RocksDbFaultTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  RocksDbFaultTest()
      : fs_(std::make_shared<FaultInjectingFileSystem>(
            rocksdb::FileSystem::Default())),
        env_(NewFaultInjectingEnv(fs_)) {}

  std::unique_ptr<RocksDbJobStore> Open(bool faulty) {
    RocksDbJobStore::Options options;
    if (faulty) options.env = env_.get();
    absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store =
        RocksDbJobStore::Open(dir_.path(), options);
    EXPECT_OK(store);
    return store.ok() ? *std::move(store) : nullptr;
  }

  TempDir dir_;
  std::shared_ptr<FaultInjectingFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
};

// 50 stored jobs s0..s49 due at i*10, then one batch that creates n0..n99,
// moves s0..s19, deletes s20..s39 and kills s40..s44.
std::vector<Mutation> Seed() {
  std::vector<Mutation> seed;
  for (int i = 0; i < 50; ++i) {
    seed.push_back(Mutation::Put(MakeRecord("t", absl::StrCat("s", i), i * 10),
                                 std::nullopt));
  }
  return seed;
}

std::vector<Mutation> MixedBatch() {
  std::vector<Mutation> batch;
  for (int i = 0; i < 100; ++i) {
    batch.push_back(Mutation::Put(
        MakeRecord("t", absl::StrCat("n", i), 100'000 + i,
                   v1::JOB_STATE_SCHEDULED, std::string(100, 'p')),
        std::nullopt));
  }
  for (int i = 0; i < 20; ++i) {
    batch.push_back(Mutation::Put(
        MakeRecord("t", absl::StrCat("s", i), 50'000 + i), i * 10));
  }
  for (int i = 20; i < 40; ++i) {
    batch.push_back(Mutation::Delete("t", absl::StrCat("s", i), i * 10));
  }
  for (int i = 40; i < 45; ++i) {
    batch.push_back(Mutation::Put(
        MakeRecord("t", absl::StrCat("s", i), i * 10, v1::JOB_STATE_DEAD),
        i * 10));
  }
  return batch;
}

TEST_P(RocksDbFaultTest, FailedBatchIsAllOrNothingAfterReopen) {
  // The model: what the store holds before and after the batch.
  InMemoryJobStore model;
  ASSERT_OK(model.Apply(Seed(), Durability::kSync));
  const StoreDump before = Dump(model);
  ASSERT_OK(model.Apply(MixedBatch(), Durability::kSync));
  const StoreDump after = Dump(model);

  std::unique_ptr<RocksDbJobStore> store = Open(/*faulty=*/true);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Apply(Seed(), Durability::kSync));
  // What reached the WAL is counted as it passes the file system: the
  // WAL files' sizes also change when RocksDB deletes an obsolete WAL file
  // in the background (the one Open's flush of the store's meta record
  // left behind), which under load can land between two readings.
  const uint64_t wal_before = fs_->wal_bytes_appended();
  fs_->Arm(GetParam().fault);
  const absl::Status failed = store->Apply(MixedBatch(), Durability::kSync);
  EXPECT_EQ(failed.code(), GetParam().code) << failed;
  EXPECT_GE(fs_->faults_injected(), 1);
  // What reached the WAL: nothing, half the batch, or all of it.
  const uint64_t wal_growth = fs_->wal_bytes_appended() - wal_before;
  switch (GetParam().fault) {
    case WalFault::kIoError:
    case WalFault::kNoSpace:
      EXPECT_EQ(wal_growth, 0u);
      break;
    case WalFault::kTornWrite:
    case WalFault::kSyncError:
      EXPECT_GT(wal_growth, 1000u);  // The batch is ~15 KB.
      break;
  }

  // Reads keep working and do not see the failed batch.
  EXPECT_EQ(Dump(*store), before);
  // The failure is sticky, with the same code.
  const Mutation next =
      Mutation::Put(MakeRecord("t", "later", 1), std::nullopt);
  const absl::Status refused = store->Apply({&next, 1}, Durability::kSync);
  EXPECT_EQ(refused.code(), GetParam().code) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("refused"));
  EXPECT_EQ(store->stats().write_failures, 2u);

  // Reopen from what reached the files, without faults.
  store.reset();
  fs_->Disarm();
  store = Open(/*faulty=*/false);
  ASSERT_NE(store, nullptr);
  const StoreDump reopened = Dump(*store);
  ExpectDueIndexConsistent(reopened);
  if (GetParam().may_survive) {
    EXPECT_THAT(reopened, AnyOf(Eq(before), Eq(after)));
  } else {
    EXPECT_EQ(reopened, before);
  }
  // And the store takes writes again.
  EXPECT_OK(store->Apply({&next, 1}, Durability::kSync));
}

TEST_P(RocksDbFaultTest, ConcurrentWritersLoseNoAcknowledgedBatch) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 40;
  constexpr int kPerBatch = 10;
  std::unique_ptr<RocksDbJobStore> store = Open(/*faulty=*/true);
  ASSERT_NE(store, nullptr);
  fs_->Arm(GetParam().fault, /*appends_to_skip=*/15);
  std::vector<std::vector<char>> acked(kThreads,
                                       std::vector<char>(kBatches, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<Mutation> batch;
        for (int i = 0; i < kPerBatch; ++i) {
          batch.push_back(Mutation::Put(
              MakeRecord(absl::StrCat("t", t), absl::StrCat(b, "-", i), b * 3),
              std::nullopt));
        }
        acked[t][b] = store->Apply(batch, Durability::kSync).ok();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_GE(fs_->faults_injected(), 1);

  store.reset();
  fs_->Disarm();
  store = Open(/*faulty=*/false);
  ASSERT_NE(store, nullptr);
  ExpectDueIndexConsistent(Dump(*store));
  int failed = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      int present = 0;
      ASSERT_OK(store->ScanJobs(absl::StrCat("t", t), absl::StrCat(b, "-"), "",
                                [&](const JobRecord&) {
                                  ++present;
                                  return true;
                                }));
      EXPECT_THAT(present, AnyOf(0, kPerBatch))
          << "thread " << t << " batch " << b;
      if (acked[t][b]) {
        EXPECT_EQ(present, kPerBatch) << "acked batch lost: " << t << "/" << b;
      } else {
        ++failed;
        if (!GetParam().may_survive) {
          EXPECT_EQ(present, 0);
        }
      }
    }
  }
  EXPECT_GT(failed, 0);
}

// A full disk is recoverable in place: once space is back RocksDB flushes
// its memtables to a fresh WAL and Resume() succeeds (it answers "busy"
// while that recovery runs, hence the polling). After a WAL I/O error the
// WAL cannot be trusted: Resume() fails and the store must be reopened.
TEST_P(RocksDbFaultTest, ResumeAfterTheCauseIsGone) {
  std::unique_ptr<RocksDbJobStore> store = Open(/*faulty=*/true);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Apply(Seed(), Durability::kSync));
  fs_->Arm(GetParam().fault);
  EXPECT_FALSE(store->Apply(MixedBatch(), Durability::kSync).ok());
  fs_->Disarm();
  absl::Status resumed = store->Resume();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetParam().resumable && !resumed.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    resumed = store->Resume();
  }
  const Mutation next =
      Mutation::Put(MakeRecord("t", "later", 1), std::nullopt);
  if (GetParam().resumable) {
    ASSERT_OK(resumed);
    ASSERT_OK(store->Apply({&next, 1}, Durability::kSync));
  } else {
    EXPECT_EQ(resumed.code(), absl::StatusCode::kUnavailable) << resumed;
    EXPECT_THAT(resumed.message(), ::testing::HasSubstr("reopen the store"));
    EXPECT_FALSE(store->Apply({&next, 1}, Durability::kSync).ok());
  }
  store.reset();
  store = Open(/*faulty=*/false);
  ASSERT_NE(store, nullptr);
  ExpectDueIndexConsistent(Dump(*store));
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> later,
                       store->Get("t", "later"));
  EXPECT_EQ(later.has_value(), GetParam().resumable);
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> seeded, store->Get("t", "s49"));
  EXPECT_TRUE(seeded.has_value());
}

INSTANTIATE_TEST_SUITE_P(
    WalFaults, RocksDbFaultTest,
    ::testing::Values(FaultCase{"IoError", WalFault::kIoError,
                                absl::StatusCode::kUnavailable, false, false},
                      FaultCase{"NoSpace", WalFault::kNoSpace,
                                absl::StatusCode::kResourceExhausted, false,
                                true},
                      FaultCase{"TornWrite", WalFault::kTornWrite,
                                absl::StatusCode::kUnavailable, false, false},
                      FaultCase{"SyncError", WalFault::kSyncError,
                                absl::StatusCode::kUnavailable, true, false}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace delayd::storage
