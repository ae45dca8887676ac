// JobService over a real RocksDbJobStore, whose crowds keep the due entries
// removed from their millisecond until the last is gone (ScanCrowd): a
// crowd job canceled, moved, or canceled and scheduled again while the
// fire path is still reading the crowd is readied as its latest write says,
// not as its stale entry does.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/core/fire_path.h"
#include "server/core/job_service.h"
#include "storage/fault_injecting_job_store.h"
#include "storage/rocksdb_job_store.h"
#include "tests/server/core/job_service_test_util.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::testing {
namespace {

// More than a crowd's least; ids j00000, j00001, ... in key order.
constexpr int kJobs = static_cast<int>(FirePath::kCrowdMinJobs) + 2000;
constexpr int kBatch = 1000;  // a batch's most
constexpr int64_t kDueMs = kStartMs + 600;

std::string Id(int i) { return absl::StrFormat("j%05d", i); }

class JobServiceCrowdTest : public ::testing::Test {
 protected:
  JobServiceCrowdTest()
      : rocks_(storage::testing::MustOpenRocksDb(dir_.path())),
        store_(*rocks_),
        clock_(kStartMs),
        service_(std::make_unique<JobService>(&store_, &clock_, Limits(),
                                              nullptr, absl::ZeroDuration())) {}
  ~JobServiceCrowdTest() override { service_->Stop(); }

  TopicTable::Counts Counts() { return service_->topics().CountsOf("crowd"); }
  v1::JobState StateOf(int i) {
    absl::StatusOr<v1::Job> job = service_->GetJob(GetReq("crowd", Id(i)));
    return job.ok() ? job->state() : v1::JOB_STATE_UNSPECIFIED;
  }
  void SettleAt(int64_t now_ms, int64_t next_due_ms) {
    SettleServiceAt(clock_, *service_, now_ms, next_due_ms);
  }

  storage::testing::TempDir dir_;
  std::unique_ptr<storage::RocksDbJobStore> rocks_;
  storage::FaultInjectingJobStore store_;
  timer::FakeClock clock_;
  std::unique_ptr<JobService> service_;
};

TEST_F(JobServiceCrowdTest, AJobChangedWhileItsCrowdIsReadIsReadiedAsItsWrite) {
  ASSERT_NE(rocks_, nullptr);
  service_->Start();
  for (int first = 0; first < kJobs; first += kBatch) {
    v1::ScheduleBatchRequest batch;
    for (int i = first; i < first + kBatch; ++i) {
      *batch.add_requests() = ScheduleReq("crowd", Id(i), kDueMs - kStartMs);
    }
    ASSERT_OK(service_->ScheduleBatch(batch));
  }
  // Jobs the scan reaches after the stall, in later chunks than the
  // stall's.
  constexpr int kStallAt = 4000;
  constexpr int kCanceled = 8000, kMoved = 8001, kAgain = 8002;
  absl::Notification stalled, go;
  std::atomic<bool> once{false};
  store_.StallScanDue([&](size_t index) {
    if (index != kStallAt || once.exchange(true)) return;
    stalled.Notify();
    go.WaitForNotification();
  });
  SettleAt(kDueMs - 1, kDueMs);
  clock_.SetMs(kDueMs);
  ASSERT_TRUE(stalled.WaitForNotificationWithTimeout(kWait));
  // The crowd is open: its entries stay when these writes remove them.
  EXPECT_EQ(rocks_->crowds(), 1u);
  EXPECT_GT(Counts().ready, 0);
  ASSERT_OK(service_->Cancel(CancelReq("crowd", Id(kCanceled))));
  ASSERT_OK(
      service_->Reschedule(RescheduleAtReq("crowd", Id(kMoved), kDueMs + 100)));
  ASSERT_OK(service_->Cancel(CancelReq("crowd", Id(kAgain))));
  ASSERT_OK(service_->Schedule(ScheduleReq("crowd", Id(kAgain), 0)));
  go.Notify();
  SettleAt(kDueMs, kDueMs + 100);
  store_.StallScanDue(nullptr);
  // Every job but the canceled and the moved one, each once (the one
  // scheduled again among them).
  EXPECT_EQ(Counts().ready, kJobs - 2);
  EXPECT_EQ(StateOf(kCanceled), v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(StateOf(kMoved), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Counts().live, kJobs - 1);
  // The moved job at its new time.
  SettleAt(kDueMs + 100, timer::Clock::kNoDeadline);
  EXPECT_EQ(Counts().ready, kJobs - 1);
}

}  // namespace
}  // namespace delayd::server::testing
