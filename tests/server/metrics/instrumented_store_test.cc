// InstrumentedStore: counts failed writes by code, and resumes a store that
// refused writes for lack of space once a write comes again.
#include "server/metrics/instrumented_store.h"

#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "storage/fault_injecting_job_store.h"
#include "storage/in_memory_job_store.h"
#include "storage/job_record.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

using storage::FaultInjectingJobStore;
using storage::Mutation;

Mutation PutJob(const std::string& id) {
  storage::JobRecord record;
  record.mutable_job()->set_topic("t");
  record.mutable_job()->set_id(id);
  record.mutable_job()->set_state(v1::JOB_STATE_SCHEDULED);
  return Mutation::Put(record, std::nullopt);
}

double FailureCount(prometheus::Registry& registry, const std::string& code) {
  for (const auto& family : registry.Collect()) {
    if (family.name != "delayd_store_write_failures_total") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "code" && label.value == code) {
          return metric.counter.value;
        }
      }
    }
  }
  return 0;
}

class InstrumentedStoreTest : public ::testing::Test {
 protected:
  storage::InMemoryJobStore memory_;
  FaultInjectingJobStore faults_{memory_};
  prometheus::Registry registry_;
  InstrumentedStore store_{&faults_, registry_};
};

TEST_F(InstrumentedStoreTest, DiskFullIsResumedOnTheNextWrite) {
  faults_.FailWritesUntilResume(FaultInjectingJobStore::NoSpace());
  const Mutation a = PutJob("a");
  EXPECT_EQ(store_.Apply({&a, 1}, storage::Durability::kSync).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FailureCount(registry_, "RESOURCE_EXHAUSTED"), 1);
  // The store resumes before the next write, which then succeeds.
  EXPECT_OK(store_.Apply({&a, 1}, storage::Durability::kSync));
  ASSERT_OK_AND_ASSIGN(auto stored, store_.Get("t", "a"));
  EXPECT_TRUE(stored.has_value());
}

TEST_F(InstrumentedStoreTest, IoErrorStaysUntilResumedByTheOperator) {
  faults_.FailWritesUntilResume(FaultInjectingJobStore::IoError());
  const Mutation a = PutJob("a");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(store_.Apply({&a, 1}, storage::Durability::kSync).code(),
              absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(FailureCount(registry_, "UNAVAILABLE"), 3);
  ASSERT_OK_AND_ASSIGN(auto stored, store_.Get("t", "a"));
  EXPECT_FALSE(stored.has_value());
}

}  // namespace
}  // namespace delayd::server
