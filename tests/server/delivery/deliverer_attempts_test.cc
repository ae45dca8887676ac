// Deliverer: attempt accounting — a job gets at most max_attempts
// deliveries, then goes DEAD, and an attempt counts only for a delivery
// handed to a subscriber's sink: not for one whose subscriber left between
// the credit reservation and the lease (the orphan path), across restarts
// that lose the leases, across a power loss that loses the unsynced attempt
// marks, and again after a Redrive — by the fake clock.
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
#include "storage/in_memory_job_store.h"
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

// A model of a write-ahead log under power loss: passes everything to its
// target and logs each write; what survives the power loss is every write
// up to the last synced one (a sync makes the whole log before it durable),
// replayed into another store.
class PowerLossStore final : public storage::ForwardingJobStore {
 public:
  using ForwardingJobStore::ForwardingJobStore;

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override {
    absl::MutexLock lock(&mu_);
    absl::Status s = target().Apply(mutations, durability);
    if (!s.ok()) return s;
    log_.emplace_back(mutations.begin(), mutations.end());
    if (durability == storage::Durability::kSync) synced_ = log_.size();
    return s;
  }

  // Writes into `store` what a power loss now would leave.
  void ReplaySyncedInto(storage::JobStore& store) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < synced_; ++i) {
      ASSERT_OK(store.Apply(log_[i], storage::Durability::kSync));
    }
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<storage::Mutation>> log_ ABSL_GUARDED_BY(mu_);
  size_t synced_ ABSL_GUARDED_BY(mu_) = 0;
};

// What a crash that loses unsynced writes costs: the attempt count goes back
// by the deliveries whose marks were unsynced, no more, and max_attempts
// still holds. (kill -9 loses no write: RestartsInFlightUseUp... below.)
TEST_F(DelivererTest, APowerLossRepeatsOnlyTheAttemptsOfItsUnsyncedMarks) {
  PowerLossStore wal(memory_);
  storage::InMemoryJobStore survived;
  service_ = std::make_unique<JobService>(&wal, &clock_, limits_);
  absl::Cleanup stop = [this] { service_.reset(); };  // before the stores
  service().Start();
  MustScheduleWith("t", "a", 0, Attempts(4));  // synced
  Sub sub = Subscribe("t");
  ASSERT_TRUE(sub.sink->WaitFor(1));  // attempt 1: its mark, unsynced
  ASSERT_OK(Nack(sub.sink->at(0).ack_token(), 0));
  ASSERT_TRUE(sub.sink->WaitFor(2));   // attempt 2: its mark, unsynced
  MustSchedule("t", "later", 60'000);  // synced: all of the above is durable
  ASSERT_OK(Nack(sub.sink->at(1).ack_token(), 0));
  ASSERT_TRUE(sub.sink->WaitFor(3));  // attempt 3: unsynced, lost below
  EXPECT_EQ(sub.sink->at(2).attempt(), 3u);

  service_.reset();  // the power goes
  wal.ReplaySyncedInto(survived);
  service_ = std::make_unique<JobService>(&survived, &clock_, limits_);
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats recovered,
                       service().Recover());
  EXPECT_EQ(recovered.in_flight, 1);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(job.attempts(), 2u);
  service().Start();
  Sub again = Subscribe("t");
  // Attempt 3 once more: back by the one delivery whose mark was lost.
  ASSERT_TRUE(again.sink->WaitFor(1));
  EXPECT_EQ(again.sink->at(0).attempt(), 3u);
  ASSERT_OK(Nack(again.sink->at(0).ack_token(), 0));
  ASSERT_TRUE(again.sink->WaitFor(2));
  EXPECT_EQ(again.sink->at(1).attempt(), 4u);
  // The fourth was the last of max_attempts 4.
  ASSERT_OK_AND_ASSIGN(v1::NackResponse last,
                       Nack(again.sink->at(1).ack_token(), 0));
  EXPECT_EQ(last.job().state(), v1::JOB_STATE_DEAD);
  Quiesce();
  EXPECT_EQ(again.sink->count(), 2u);
}

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
  ASSERT_TRUE(WaitForState("t", "a", v1::JOB_STATE_DEAD));
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
  ASSERT_TRUE(WaitForState("t", "a", v1::JOB_STATE_DEAD));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 3u);
  ASSERT_OK_AND_ASSIGN(job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job.attempts(), 3u);
}

}  // namespace
}  // namespace delayd::server::testing
