#include "storage/fault_injecting_job_store.h"

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "storage/in_memory_job_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::MakeRecord;

absl::Status PutOne(JobStore& store, const char* id) {
  const Mutation m = Mutation::Put(MakeRecord("t", id, 1), std::nullopt);
  return store.Apply({&m, 1}, Durability::kSync);
}

TEST(FaultInjectingJobStoreTest, FailsTheNextWritesThenPassesThrough) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  store.FailNextWrites(2, FaultInjectingJobStore::NoSpace());
  EXPECT_EQ(PutOne(store, "a").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(PutOne(store, "b").code(), absl::StatusCode::kResourceExhausted);
  ASSERT_OK_AND_ASSIGN(auto missing, store.Get("t", "a"));
  EXPECT_FALSE(missing.has_value());
  EXPECT_OK(PutOne(store, "c"));
  ASSERT_OK_AND_ASSIGN(auto found, store.Get("t", "c"));
  EXPECT_TRUE(found.has_value());
  EXPECT_EQ(store.injected_failures(), 2);
  const StoreStats stats = store.stats();
  EXPECT_EQ(stats.writes, 3u);
  EXPECT_EQ(stats.write_failures, 2u);
}

TEST(FaultInjectingJobStoreTest, FailsUntilResume) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  store.FailWritesUntilResume(FaultInjectingJobStore::IoError());
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(PutOne(store, id).code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_OK(store.Apply({}, Durability::kSync));  // Empty: nothing to fail.
  ASSERT_OK(store.Resume());
  EXPECT_OK(PutOne(store, "d"));
  EXPECT_EQ(store.injected_failures(), 3);
}

using Read = FaultInjectingJobStore::Read;

// Each read of the store, by kind; returns its status.
absl::Status DoRead(const JobStore& store, Read kind) {
  auto visit_due = [](int64_t, std::string_view, std::string_view) {
    return true;
  };
  switch (kind) {
    case Read::kGet:
      return store.Get("t", "a").status();
    case Read::kMultiGet: {
      const JobKeyView key{"t", "a"};
      return store.MultiGet({&key, 1}).status();
    }
    case Read::kScanDue:
      return store.ScanDue(0, INT64_MAX, visit_due);
    case Read::kScanExpiry:
      return store.ScanExpiry(0, INT64_MAX, visit_due);
    case Read::kScanJobs:
      return store.ScanJobs("t", "", "", [](const JobRecord&) { return true; });
    case Read::kScanTopics:
      return store.ScanTopics([](std::string_view) { return true; });
    case Read::kAny:
      break;
  }
  return absl::InternalError("no such read");
}

constexpr Read kEveryRead[] = {Read::kGet,      Read::kMultiGet,
                               Read::kScanDue,  Read::kScanExpiry,
                               Read::kScanJobs, Read::kScanTopics};

TEST(FaultInjectingJobStoreTest, FailsTheNextReadsOfOneKindOnly) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  ASSERT_OK(PutOne(store, "a"));
  for (Read kind : kEveryRead) {
    store.FailNextReads(kind, 2, FaultInjectingJobStore::ReadError());
    for (Read other : kEveryRead) {
      if (other == kind) continue;
      EXPECT_OK(DoRead(store, other));
    }
    EXPECT_EQ(DoRead(store, kind).code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(DoRead(store, kind).code(), absl::StatusCode::kUnavailable);
    EXPECT_OK(DoRead(store, kind));
  }
  EXPECT_EQ(store.injected_read_failures(), 12);
  EXPECT_EQ(store.injected_failures(), 0);  // writes untouched
  EXPECT_OK(PutOne(store, "b"));
}

TEST(FaultInjectingJobStoreTest, AFailedScanVisitsNothing) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  ASSERT_OK(PutOne(store, "a"));
  store.FailNextReads(Read::kScanDue, 1, FaultInjectingJobStore::ReadError());
  int visited = 0;
  EXPECT_EQ(store
                .ScanDue(0, INT64_MAX,
                         [&](int64_t, std::string_view, std::string_view) {
                           ++visited;
                           return true;
                         })
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(visited, 0);
}

// The fire path's scan of one millisecond fails and stalls as ScanDue does.
TEST(FaultInjectingJobStoreTest, TheFireScanFailsAndStallsAsAScanDue) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  ASSERT_OK(PutOne(store, "a"));  // due at 1
  ASSERT_OK(PutOne(store, "b"));
  std::vector<std::string> visited;
  const auto visit = [&](int64_t, std::string_view, std::string_view id) {
    visited.emplace_back(id);
    return true;
  };
  store.FailNextReads(Read::kScanDue, 1, FaultInjectingJobStore::ReadError());
  EXPECT_EQ(store.ScanFireMillisecond(1, visit).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(visited.empty());

  std::vector<size_t> stalls;
  store.StallScanDue([&](size_t index) { stalls.push_back(index); });
  EXPECT_OK(store.ScanFireMillisecond(1, visit));
  store.StallScanDue(nullptr);
  EXPECT_EQ(visited, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(stalls, (std::vector<size_t>{0, 1}));
}

TEST(FaultInjectingJobStoreTest, FailsNextReadsOfAnyKindInTurn) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  store.FailNextReads(Read::kAny, 3, FaultInjectingJobStore::ReadError());
  EXPECT_FALSE(DoRead(store, Read::kGet).ok());
  EXPECT_FALSE(DoRead(store, Read::kScanDue).ok());
  EXPECT_FALSE(DoRead(store, Read::kScanTopics).ok());
  for (Read kind : kEveryRead) EXPECT_OK(DoRead(store, kind));
  EXPECT_EQ(store.injected_read_failures(), 3);
}

TEST(FaultInjectingJobStoreTest, FailsReadsUntilCleared) {
  InMemoryJobStore target;
  FaultInjectingJobStore store(target);
  ASSERT_OK(PutOne(store, "a"));
  store.FailReadsUntilCleared(Read::kAny, absl::DataLossError("injected"));
  for (int i = 0; i < 3; ++i) {
    for (Read kind : kEveryRead) {
      EXPECT_EQ(DoRead(store, kind).code(), absl::StatusCode::kDataLoss);
    }
  }
  EXPECT_OK(PutOne(store, "b"));  // writes still work
  store.ClearReadFaults();
  for (Read kind : kEveryRead) EXPECT_OK(DoRead(store, kind));
  ASSERT_OK_AND_ASSIGN(auto found, store.Get("t", "b"));
  EXPECT_TRUE(found.has_value());
  EXPECT_EQ(store.injected_read_failures(), 18);

  // One kind until cleared, the others pass.
  store.FailReadsUntilCleared(Read::kMultiGet,
                              FaultInjectingJobStore::ReadError());
  EXPECT_FALSE(DoRead(store, Read::kMultiGet).ok());
  EXPECT_OK(DoRead(store, Read::kGet));
  store.ClearReadFaults();
  EXPECT_OK(DoRead(store, Read::kMultiGet));
}

}  // namespace
}  // namespace delayd::storage
