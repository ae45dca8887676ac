// JobService under store read faults (FaultInjectingJobStore::FailNextReads
// and FailReadsUntilCleared): the fire path, dispatch, Ack, Nack,
// ExtendLease, lease expiry, recovery, the memory horizon and the Sweeper.
// The rule each test checks: a transient read error delays, never strands —
// once the fault clears, the job is delivered or reaches its state without a
// restart. The clock is a FakeClock; tests poll with a short real-time
// deadline, never sleep for a timer.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

using Read = storage::FaultInjectingJobStore::Read;

absl::Status ReadError() {
  return storage::FaultInjectingJobStore::ReadError();
}

class ReadFaultTest : public DelivererTest {
 protected:
  // Polls until at least `n` reads have been failed by injection.
  bool WaitForReadFailures(int64_t n) {
    return PollUntil([&] { return store_.injected_read_failures() >= n; },
                     kWait, absl::Milliseconds(1));
  }

  v1::JobState StateOf(std::string_view topic, std::string_view id) {
    absl::StatusOr<v1::Job> job = service().GetJob(GetReq(topic, id));
    EXPECT_OK(job);
    return job.ok() ? job->state() : v1::JOB_STATE_UNSPECIFIED;
  }
};

// Issue 17, item 1: the retry after a failed read of the due index scanned
// the retry's own millisecond, where the job's due entry is not; the job
// stayed SCHEDULED until a restart.
TEST_F(ReadFaultTest, AFailedDueIndexReadRetriesTheJobsOwnMillisecond) {
  service().Start();
  MustSchedule("t", "a", 300);
  store_.FailNextReads(Read::kScanDue, 1, ReadError());
  // The fire at +300 fails to read and tries again 100 ms later.
  SettleAt(kStartMs + 300, kStartMs + 400);
  EXPECT_EQ(store_.injected_read_failures(), 1);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 400);
  ASSERT_TRUE(WaitForReady("t", 1)) << "stranded after one failed read";
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_READY);
  EXPECT_EQ(service().timers_pending(), 0u);
}

TEST_F(ReadFaultTest, ALastingDueIndexFaultRetriesUntilItClears) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("t", "canceled", 300);
  MustSchedule("t", "moved", 300);
  MustSchedule("u", "b", 300);
  store_.FailReadsUntilCleared(Read::kScanDue, ReadError());
  SettleAt(kStartMs + 300, kStartMs + 400);
  for (int64_t t = kStartMs + 400; t < kStartMs + 700; t += 100) {
    SettleAt(t, t + 100);  // each retry fails and tries again
  }
  const int64_t failed = store_.injected_read_failures();
  EXPECT_GE(failed, 4);
  EXPECT_EQ(Counts("t").ready + Counts("u").ready, 0);
  // Changes during the fault are honoured by the retries.
  ASSERT_OK(service().Cancel(CancelReq("t", "canceled")));
  ASSERT_OK(
      service().Reschedule(RescheduleAtReq("t", "moved", kStartMs + 2000)));
  store_.ClearReadFaults();
  clock_.SetMs(kStartMs + 700);
  ASSERT_TRUE(WaitForReady("t", 1));
  ASSERT_TRUE(WaitForReady("u", 1));
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_READY);
  EXPECT_EQ(StateOf("u", "b"), v1::JOB_STATE_READY);
  SettleAt(kStartMs + 1999, kStartMs + 2000);
  EXPECT_EQ(Counts("t").ready, 1);  // not "canceled", not "moved" yet
  clock_.SetMs(kStartMs + 2000);
  ASSERT_TRUE(WaitForReady("t", 2));
  EXPECT_EQ(StateOf("t", "moved"), v1::JOB_STATE_READY);
  EXPECT_EQ(Counts("t").live, 2);
}

TEST_F(ReadFaultTest, DispatchRetriesAFailedReadWithoutCountingAnAttempt) {
  service().Start();
  Sub sub = Subscribe("t");
  store_.FailReadsUntilCleared(Read::kMultiGet, ReadError());
  MustSchedule("t", "a", 100);
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(WaitForReadFailures(2));  // dispatch tried, and again
  EXPECT_EQ(sub.sink->count(), 0u);
  store_.ClearReadFaults();
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const v1::Delivery d = sub.sink->at(0);
  EXPECT_EQ(d.attempt(), 1u);
  EXPECT_EQ(d.job().id(), "a");
  EXPECT_EQ(AckCode(d.ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Counts("t").live, 0);
}

TEST_F(ReadFaultTest, AckThatCannotReadFailsAndCanBeRetried) {
  retention_ = absl::Hours(1);  // Ack then reads the record to keep it DONE
  Restart();
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const std::string token = sub.sink->at(0).ack_token();
  Quiesce();
  store_.FailNextReads(Read::kMultiGet, 1, ReadError());
  v1::AckRequest ack;
  ack.add_ack_tokens(token);
  EXPECT_EQ(service().Ack(ack).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(AckCode(token), absl::StatusCode::kOk);
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_DONE);
}

TEST_F(ReadFaultTest, NackThatCannotReadFailsAndCanBeRetried) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const v1::Delivery d = sub.sink->at(0);

  // ExtendLease of a current lease reads nothing (the lease is in memory):
  // the fault waits for the Nack.
  store_.FailNextReads(Read::kGet, 1, ReadError());
  v1::ExtendLeaseRequest extend;
  extend.set_ack_token(d.ack_token());
  *extend.mutable_extend_by() = DurationMs(60'000);
  ASSERT_OK_AND_ASSIGN(v1::ExtendLeaseResponse extended,
                       service().ExtendLease(extend));
  EXPECT_EQ(Ms(extended.lease_expires_at()), clock_.NowMs() + 60'000);

  EXPECT_EQ(Nack(d.ack_token(), 500).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_IN_FLIGHT);
  ASSERT_OK(Nack(d.ack_token(), 500));
  EXPECT_EQ(StateOf("t", "a"), v1::JOB_STATE_SCHEDULED);
  clock_.AdvanceMs(500);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(1).attempt(), 2u);
}

TEST_F(ReadFaultTest, ALeaseThatExpiresDuringAReadFaultEndsAfterIt) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);  // lease 30 s by default
  ASSERT_TRUE(sub.sink->WaitFor(1));
  store_.FailReadsUntilCleared(Read::kAny, ReadError());
  clock_.AdvanceMs(30'000);
  ASSERT_TRUE(WaitForReadFailures(1));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
  store_.ClearReadFaults();
  clock_.AdvanceMs(1000);  // the expiry is tried again
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(1).attempt(), 2u);
}

TEST_F(ReadFaultTest, RecoverFailsOnAReadErrorAndARetryRecoversEverything) {
  MustSchedule("t", "a", 100);
  MustSchedule("t", "b", 5000);
  Restart();
  store_.FailNextReads(Read::kScanDue, 1, ReadError());
  EXPECT_EQ(service().Recover().status().code(),
            absl::StatusCode::kUnavailable);
  Restart();
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats rs, service().Recover());
  EXPECT_EQ(rs.jobs, 2);
  service().Start();
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(WaitForReady("t", 1));
  clock_.SetMs(kStartMs + 5000);
  ASSERT_TRUE(WaitForReady("t", 2));
}

TEST_F(ReadFaultTest, AFailedHorizonScanIsScannedAgainByTheNextRound) {
  MustSchedule("t", "far", 3000);
  Restart();
  service().SetMemoryHorizon(absl::Seconds(1));  // a round every 250 ms
  ASSERT_OK(service().Recover());
  EXPECT_EQ(service().timers_pending(), 0u);
  store_.FailReadsUntilCleared(Read::kScanDue, ReadError());
  service().Start();
  SettleAt(kStartMs + 250, kStartMs + 500);
  SettleAt(kStartMs + 500, kStartMs + 750);
  EXPECT_GE(store_.injected_read_failures(), 2);
  store_.ClearReadFaults();
  for (int64_t t = kStartMs + 750; t < kStartMs + 3000; t += 250) {
    SettleAt(t, t + 250);
  }
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 3000);
  ASSERT_TRUE(WaitForReady("t", 1));
}

TEST_F(ReadFaultTest, TheSweeperTriesAgainAfterAReadError) {
  retention_ = absl::Seconds(10);
  Restart();
  MustSchedule("t", "a", 60'000);
  ASSERT_OK(service().Cancel(CancelReq("t", "a")));  // kept 10 s, CANCELED
  clock_.AdvanceMs(10'000);
  for (Read kind : {Read::kScanExpiry, Read::kMultiGet}) {
    store_.FailNextReads(kind, 1, ReadError());
    EXPECT_EQ(service().sweeper().SweepOnce(clock_.NowMs(), 10).status().code(),
              absl::StatusCode::kUnavailable);
    ASSERT_TRUE(Stored("t", "a").has_value());
  }
  ASSERT_OK_AND_ASSIGN(size_t taken,
                       service().sweeper().SweepOnce(clock_.NowMs(), 10));
  EXPECT_EQ(taken, 1u);
  EXPECT_FALSE(Stored("t", "a").has_value());
}

TEST_F(ReadFaultTest, TheSweeperThreadSweepsOnceALastingFaultClears) {
  retention_ = absl::Seconds(10);
  Restart();
  MustSchedule("t", "a", 60'000);
  ASSERT_OK(service().Cancel(CancelReq("t", "a")));
  store_.FailReadsUntilCleared(Read::kScanExpiry, ReadError());
  service().Start();
  clock_.AdvanceMs(10'000);
  ASSERT_TRUE(WaitForReadFailures(1));
  EXPECT_TRUE(Stored("t", "a").has_value());
  store_.ClearReadFaults();
  // The sweeper deletes the record, then counts it: wait for the count.
  ASSERT_TRUE(PollUntil(
      [&] {
        clock_.AdvanceMs(100);  // to the sweeper's retry
        return service().sweeper().swept() == 1;
      },
      kWait, absl::Milliseconds(1)));
  EXPECT_FALSE(Stored("t", "a").has_value());
}

// Issue 17: the background scan at Start that counts DEAD, DONE and
// CANCELED records and finishes leftover CANCELED ones gave up on a read
// error until the next restart: the counts stayed at zero and the leftover
// stayed. It tries again (100 ms, doubling), counting each job once.
TEST_F(ReadFaultTest, TheTerminalStateScanTriesAgainAfterReadErrors) {
  PutRecord("t", "dead", v1::JOB_STATE_DEAD, kStartMs - 10);
  PutRecord("t", "done", v1::JOB_STATE_DONE, kStartMs - 10);
  PutRecord("t", "left", v1::JOB_STATE_CANCELED, kStartMs - 10);
  PutRecord("u", "dead", v1::JOB_STATE_DEAD, kStartMs - 10);
  Restart();
  ASSERT_OK(service().Recover());
  // Two runs fail listing the topics, a third reading topic t.
  store_.FailNextReads(Read::kScanTopics, 2, ReadError());
  store_.FailNextReads(Read::kScanJobs, 1, ReadError());
  service().Start();
  ASSERT_TRUE(PollUntil(
      [&] {
        clock_.AdvanceMs(100);  // to the scan's next try
        // Deleted, then uncounted: wait for both.
        return !Stored("t", "left").has_value() && Counts("t").canceled == 0;
      },
      kWait, absl::Milliseconds(1)))
      << "the leftover CANCELED record was never finished";
  EXPECT_EQ(store_.injected_read_failures(), 3);
  EXPECT_EQ(Counts("t").dead, 1);
  EXPECT_EQ(Counts("t").done, 1);
  EXPECT_EQ(Counts("t").canceled, 0);
  EXPECT_EQ(Counts("u").dead, 1);
}

TEST_F(ReadFaultTest, StopEndsTheTerminalStateScansBackOff) {
  PutRecord("t", "dead", v1::JOB_STATE_DEAD, kStartMs - 10);
  Restart();
  store_.FailReadsUntilCleared(Read::kScanTopics, ReadError());
  service().Start();
  ASSERT_TRUE(WaitForReadFailures(1));
  service().Stop();  // returns though the clock never reaches the retry
  EXPECT_EQ(Counts("t").dead, 0);
}

// Issue 17: finishing a leftover CANCELED record (canceled in flight, its
// delivery ended with an earlier process) gave up on a failed read or
// write; the record stayed until a restart. It is tried again later.
TEST_F(ReadFaultTest,
       ALeftoverCanceledRecordIsFinishedAfterReadAndWriteErrors) {
  PutRecord("t", "left", v1::JOB_STATE_CANCELED, kStartMs - 10);
  Restart();
  ASSERT_OK(service().Recover());
  store_.FailNextReads(Read::kMultiGet, 1, ReadError());
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  service().Start();
  ASSERT_TRUE(WaitForReadFailures(1));
  ASSERT_TRUE(PollUntil(
      [&] {
        clock_.AdvanceMs(100);  // to the next try
        // Deleted, then uncounted: wait for both.
        return !Stored("t", "left").has_value() && Counts("t").canceled == 0;
      },
      kWait, absl::Milliseconds(1)))
      << "the leftover CANCELED record was never finished";
  EXPECT_EQ(store_.injected_read_failures(), 1);
  EXPECT_EQ(store_.injected_failures(), 1);
  EXPECT_EQ(Counts("t").canceled, 0);
}

}  // namespace
}  // namespace delayd::server::testing
