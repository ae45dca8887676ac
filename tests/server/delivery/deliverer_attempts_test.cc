// Deliverer: attempt accounting — a job gets at most max_attempts
// deliveries, then goes DEAD, and an attempt counts only for a delivery
// handed to a subscriber's sink: not for one whose subscriber left between
// the credit reservation and the lease (the orphan path), across restarts
// that lose the leases, and again after a Redrive — by the fake clock.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/delivery/deliverer.h"
#include "storage/forwarding_job_store.h"
#include "storage/job_store.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

v1::RetryPolicy Attempts(uint32_t max_attempts) {
  v1::RetryPolicy retry;
  retry.set_max_attempts(max_attempts);
  *retry.mutable_lease() = DurationMs(1000);
  return retry;
}

// Passes everything to its target; runs `hook` once, after the first write
// that leases a job (an attempt mark), as the dispatcher's write returns.
class HookedStore final : public storage::ForwardingJobStore {
 public:
  using ForwardingJobStore::ForwardingJobStore;

  void OnFirstLeaseWrite(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override {
    absl::Status s = target().Apply(mutations, durability);
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      for (const storage::Mutation& m : mutations) {
        if (hook_ && m.kind() == storage::Mutation::Kind::kMarkAttempt &&
            m.attempt() > 0) {
          hook = std::move(hook_);
          hook_ = nullptr;
          break;
        }
      }
    }
    if (hook) hook();
    return s;
  }

 private:
  absl::Mutex mu_;
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
};

TEST_F(DelivererTest, ASubscriberLeavingBeforeItsLeaseCostsNoAttempt) {
  HookedStore hooked(memory_);
  service_ = std::make_unique<JobService>(&hooked, &clock_, limits_);
  absl::Cleanup stop = [this] { service_.reset(); };  // before `hooked`
  service().Start();
  Sub leaving = Subscribe("t", 1);
  // Its credit is reserved and the lease written when the job falls due;
  // it leaves as that write returns.
  hooked.OnFirstLeaseWrite(
      [&] { deliverer().Unsubscribe(leaving.id, "subscriber stream ended"); });
  MustScheduleWith("t", "a", 0, Attempts(1));
  Quiesce();
  EXPECT_EQ(leaving.sink->count(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.attempts(), 0u);
  EXPECT_NE(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(MarkOf("t", "a"), 0u);  // undone: a crash now costs nothing
  // Its one attempt is still there, for a subscriber that stays.
  Sub staying = Subscribe("t", 1);
  ASSERT_TRUE(staying.sink->WaitFor(1));
  EXPECT_EQ(staying.sink->at(0).attempt(), 1u);
  EXPECT_EQ(AckCode(staying.sink->at(0).ack_token()), absl::StatusCode::kOk);
}

// Each restart loses the leases: the IN_FLIGHT record of a delivery that
// was handed out counts as that attempt, and the job is delivered again
// only while attempts remain.
TEST_F(DelivererTest, RestartsInFlightUseUpAttemptsThenTheJobIsDead) {
  service().Start();
  MustScheduleWith("t", "a", 0, Attempts(3));
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    SCOPED_TRACE(attempt);
    Sub sub = Subscribe("t");
    ASSERT_TRUE(sub.sink->WaitFor(1));
    EXPECT_EQ(sub.sink->at(0).attempt(), attempt);
    Restart();
    ASSERT_OK(service().Recover());
    service().Start();
  }
  Sub sub = Subscribe("t");
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job.attempts(), 3u);
  EXPECT_EQ(Stats("t").dead(), 1u);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(Counts("t").in_flight, 0);

  // Redriven: attempts start again, and run out again.
  v1::RedriveRequest redrive;
  redrive.set_topic("t");
  ASSERT_OK(service().Redrive(redrive));
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_TRUE(sub.sink->WaitFor(attempt));
    EXPECT_EQ(sub.sink->at(attempt - 1).attempt(), attempt);
    clock_.AdvanceMs(1000);  // the lease expires
  }
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 3u);
  ASSERT_OK_AND_ASSIGN(job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job.attempts(), 3u);
}

}  // namespace
}  // namespace delayd::server::testing
