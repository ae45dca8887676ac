#include "storage/fault_injecting_job_store.h"

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

}  // namespace
}  // namespace delayd::storage
