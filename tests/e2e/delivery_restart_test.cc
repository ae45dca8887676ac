// End to end: delivery across restarts of the real binary — jobs that were
// READY before any subscriber existed, and jobs that were in flight, are
// delivered after a SIGTERM and after a SIGKILL restart, within their
// max_attempts; a crowd stopped half-way is recovered exactly.
#include <signal.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/delivery_fixture.h"
#include "tests/support/valid_time.h"

namespace delayd::testing {
namespace {

class DeliveryRestartTest : public DeliveryTest,
                            public ::testing::WithParamInterface<int> {};

TEST_P(DeliveryRestartTest, ReadyJobsWithoutSubscribersAreDeliveredAfter) {
  for (int i = 0; i < 20; ++i) {
    MustSchedule(Spec("ready", absl::StrCat("j", i), absl::ZeroDuration()));
  }
  WaitReady("ready", 20);
  ASSERT_NO_FATAL_FAILURE(Restart(GetParam()));
  TestSubscriber& sub = Subscribe("ready");
  ASSERT_TRUE(sub.WaitFor(20));
  std::set<std::string> ids;
  for (const Received& r : sub.received()) {
    EXPECT_EQ(r.delivery.attempt(), 1u);
    ids.insert(r.delivery.job().id());
  }
  EXPECT_EQ(ids.size(), 20u);
}

TEST_P(DeliveryRestartTest, InFlightJobsAreDeliveredAgainWithTheNextAttempt) {
  TestSubscriber& before = Subscribe("flight");
  for (int i = 0; i < 5; ++i) {
    MustSchedule(Spec("flight", absl::StrCat("j", i), absl::ZeroDuration()));
  }
  ASSERT_TRUE(before.WaitFor(5));
  const std::string old_token = before.at(0).delivery.ack_token();
  ASSERT_NO_FATAL_FAILURE(Restart(GetParam()));
  TestSubscriber& after = Subscribe("flight");
  ASSERT_TRUE(after.WaitFor(5));
  for (const Received& r : after.received()) {
    EXPECT_EQ(r.delivery.attempt(), 2u);
  }
  EXPECT_EQ(delivery_->AckCode(old_token),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// Each restart while the job is in flight costs the attempt it was
// delivered with; after max_attempts deliveries the job is DEAD, never
// delivered again.
TEST_P(DeliveryRestartTest, RestartsInFlightUseUpMaxAttemptsThenDead) {
  v1::JobSpec spec = Spec("crash", "a", absl::ZeroDuration());
  spec.mutable_retry()->set_max_attempts(3);
  MustSchedule(spec);
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    SCOPED_TRACE(attempt);
    TestSubscriber& sub = Subscribe("crash");
    ASSERT_TRUE(sub.WaitFor(1));
    EXPECT_EQ(sub.at(0).delivery.attempt(), attempt);
    EXPECT_EQ(InvalidTimeFields(sub.at(0).delivery),
              std::vector<std::string>());
    ASSERT_NO_FATAL_FAILURE(Restart(GetParam()));
  }
  TestSubscriber& last = Subscribe("crash");
  // The record is written DEAD, then counted: wait for both.
  EXPECT_TRUE(Eventually([&] {
    auto job = client_->GetJob("crash", "a");
    return job.ok() && job.response.state() == v1::JOB_STATE_DEAD &&
           client_->StatsOf("crash").dead() == 1u;
  })) << client_->StatsOf("crash").DebugString();
  auto job = client_->GetJob("crash", "a");
  ASSERT_RPC_OK(job);
  EXPECT_EQ(job.response.attempts(), 3u);
  EXPECT_EQ(InvalidTimeFields(job.response), std::vector<std::string>());
  EXPECT_EQ(last.received().size(), 0u);
}

TEST_P(DeliveryRestartTest, DeadJobsAreCountedAfter) {
  TestSubscriber& sub = Subscribe("dead");
  for (int i = 0; i < 3; ++i) {
    MustSchedule(Spec("dead", absl::StrCat("j", i), absl::ZeroDuration()));
  }
  ASSERT_TRUE(sub.WaitFor(3));
  for (const Received& r : sub.received()) {
    auto reply = delivery_->Nack(r.delivery.ack_token(), std::nullopt, "bad",
                                 /*dead_letter=*/true);
    ASSERT_RPC_OK(reply);
  }
  EXPECT_EQ(client_->StatsOf("dead").dead(), 3u);
  ASSERT_NO_FATAL_FAILURE(Restart(GetParam()));
  EXPECT_TRUE(Eventually([&] { return client_->StatsOf("dead").dead() == 3; }))
      << client_->StatsOf("dead").DebugString();
}

// A crowd (FirePath::kCrowdMinJobs or more due at one instant) stopped
// with part of it acked and part in flight: after the restart its acked
// jobs are neither counted nor delivered, and the rest are, once each, the
// ones in flight with their next attempt.
TEST_P(DeliveryRestartTest, ACrowdStoppedHalfWayIsRecoveredExactly) {
  constexpr size_t kJobs = 12'000;
  TestSubscriber& before = Subscribe("crowd", 1000);
  ASSERT_TRUE(
      Eventually([&] { return client_->StatsOf("crowd").subscribers() == 1; }));
  // Far enough ahead that all are in before the crowd is taken ahead of
  // its instant, also on a slow (sanitized) build.
  const absl::Time due = absl::Now() + absl::Seconds(5);
  for (size_t b = 0; b < kJobs / 1000; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      *batch.add_requests() =
          Request(SpecAt("crowd", absl::StrCat(b, "-", i), due));
    }
    ASSERT_RPC_OK(client_->ScheduleBatch(batch));
  }
  // Two credits' worth acked, a third in flight.
  std::set<std::string> acked;
  for (size_t round = 1; round <= 2; ++round) {
    ASSERT_TRUE(before.WaitFor(round * 1000, absl::Seconds(60)));
    std::vector<std::string> tokens;
    for (const Received& r : before.received()) {
      if (acked.insert(r.delivery.job().id()).second) {
        tokens.push_back(r.delivery.ack_token());
      }
    }
    ASSERT_EQ(tokens.size(), 1000u);
    ASSERT_RPC_OK(delivery_->Ack(tokens));
  }
  ASSERT_TRUE(before.WaitFor(3000, absl::Seconds(60)));
  std::set<std::string> in_flight;
  for (const Received& r : before.received()) {
    if (!acked.contains(r.delivery.job().id())) {
      in_flight.insert(r.delivery.job().id());
    }
  }
  ASSERT_EQ(in_flight.size(), 1000u);
  ASSERT_NO_FATAL_FAILURE(Restart(GetParam()));

  EXPECT_TRUE(Eventually([&] {
    const v1::TopicStats stats = client_->StatsOf("crowd");
    return stats.ready() == kJobs - acked.size() && stats.scheduled() == 0 &&
           stats.in_flight() == 0;
  })) << client_->StatsOf("crowd").DebugString();
  TestSubscriber& after = Subscribe("crowd", 1000, /*auto_ack=*/true);
  ASSERT_TRUE(after.WaitFor(kJobs - acked.size(), absl::Seconds(60)));
  EXPECT_TRUE(Eventually([&] {
    const v1::TopicStats stats = client_->StatsOf("crowd");
    return stats.ready() == 0 && stats.in_flight() == 0;
  })) << client_->StatsOf("crowd").DebugString();
  std::set<std::string> ids;
  for (const Received& r : after.received()) {
    const std::string& id = r.delivery.job().id();
    EXPECT_FALSE(acked.contains(id)) << id;
    EXPECT_TRUE(ids.insert(id).second) << id << " twice";
    EXPECT_EQ(r.delivery.attempt(), in_flight.contains(id) ? 2u : 1u) << id;
  }
  EXPECT_EQ(ids.size(), kJobs - acked.size());
}

INSTANTIATE_TEST_SUITE_P(Signals, DeliveryRestartTest,
                         ::testing::Values(SIGTERM, SIGKILL),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM
                                      ? std::string("Sigterm")
                                      : std::string("Sigkill");
                         });

}  // namespace
}  // namespace delayd::testing
