// Deliverer: dispatch to subscribers — on time and never early (also when
// the wall clock steps), round-robin within credit, a slow subscriber holding
// back nobody, stream ends redelivering at once, restarts redelivering what
// was in flight, and the DEAD count rebuilt after a restart. Leases (ack,
// nack, expiry, extension, cancel, replace) are in deliverer_lease_test.cc.
#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/fire_path.h"
#include "server/delivery/ack_token.h"
#include "server/delivery/dispatcher.h"
#include "server/jobs/job_key.h"
#include "server/jobs/key_locks.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kNever = timer::Clock::kNoDeadline;

TEST_F(DelivererTest, DeliversAtTheDueMillisecondWithTokenAttemptAndLease) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 500, "payload");
  SettleAt(kStartMs + 499, kStartMs + 500);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
  clock_.SetMs(kStartMs + 500);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const v1::Delivery d = sub.sink->at(0);
  EXPECT_EQ(d.job().id(), "a");
  EXPECT_EQ(d.job().payload(), "payload");
  EXPECT_EQ(d.job().state(), v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(d.job().attempts(), 1u);
  EXPECT_EQ(d.attempt(), 1u);
  EXPECT_EQ(Ms(d.lease_expires_at()), kStartMs + 500 + 30'000);
  ASSERT_OK_AND_ASSIGN(AckToken token,
                       DecodeAckToken("t", d.ack_token(), kMaxTokenChars));
  EXPECT_EQ(token.topic, "t");
  EXPECT_EQ(token.id, "a");
  EXPECT_EQ(token.attempt, 1u);

  // Lean lease: the record is not rewritten; the due entry's attempt mark
  // alone records the delivery. The job shows as the lease makes it.
  std::optional<storage::JobRecord> stored = Stored("t", "a");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(stored->job().attempts(), 0u);
  EXPECT_EQ(stored->delivery_nonce(), 0u);
  EXPECT_EQ(stored->lease_expires_at_ms(), 0);
  EXPECT_EQ(storage::DueIndexEntryOf(*stored), kStartMs + 500);
  EXPECT_EQ(MarkOf("t", "a"), 1u);
  ASSERT_OK_AND_ASSIGN(v1::Job shown, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(shown.state(), v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(shown.attempts(), 1u);
  EXPECT_EQ(Ms(shown.updated_at()), kStartMs + 500);
  const v1::TopicStats stats = Stats("t");
  EXPECT_EQ(stats.in_flight(), 1u);
  EXPECT_EQ(stats.ready(), 0u);
  EXPECT_EQ(stats.scheduled(), 0u);
  EXPECT_EQ(stats.subscribers(), 1u);
}

TEST_F(DelivererTest, ReadyJobsWaitForASubscriberThenGoAtOnce) {
  service().Start();
  for (int i = 0; i < 5; ++i) MustSchedule("t", absl::StrCat("j", i), 0);
  ASSERT_TRUE(WaitForReady("t", 5));
  Sub sub = Subscribe("t");
  ASSERT_TRUE(sub.sink->WaitFor(5));
  // In due order.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sub.sink->at(i).job().id(), absl::StrCat("j", i));
  }
  EXPECT_EQ(Counts("t").ready, 0);
  EXPECT_EQ(Counts("t").in_flight, 5);
}

TEST_F(DelivererTest, ThreeSubscribersShareThreeThousandJobsEvenly) {
  service().Start();
  std::vector<Sub> subs = {Subscribe("t", 10000), Subscribe("t", 10000),
                           Subscribe("t", 10000)};
  for (int b = 0; b < 3; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      *batch.add_requests() = ScheduleReq("t", absl::StrCat(b, "-", i), 100);
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(PollUntil(
      [&] {
        return subs[0].sink->count() + subs[1].sink->count() +
                   subs[2].sink->count() >=
               3000;
      },
      kWait, absl::Milliseconds(1)));
  Quiesce();
  std::set<std::string> ids;
  for (const Sub& sub : subs) {
    EXPECT_GE(sub.sink->count(), 800u);
    EXPECT_LE(sub.sink->count(), 1200u);
    for (const v1::Delivery& d : sub.sink->received()) {
      EXPECT_TRUE(ids.insert(d.job().id()).second) << "twice: " << d.job().id();
    }
  }
  EXPECT_EQ(ids.size(), 3000u);
  EXPECT_EQ(Counts("t").in_flight, 3000);
}

// A deep backlog (kTurnBacklog ready) goes out in turns: each subscriber
// in turn takes a whole round, in one Send, where an even split among four
// never sends more than 256 (a quarter of a round of 1024). The shares
// stay even.
TEST_F(DelivererTest, ADeepBacklogGoesOutInTurnsOfOneSubscriber) {
  service().Start();
  constexpr int kJobs = 35000;
  static_assert(kJobs - 256 - 512 - 1024 >= Dispatcher::kTurnBacklog);
  std::vector<uint64_t> hashes;
  for (int b = 0; b < kJobs / 1000; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      const std::string id = absl::StrCat(b, "-", i);
      hashes.push_back(KeyHash("t", id));
      *batch.add_requests() = ScheduleReq("t", id, 100);
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  clock_.SetMs(kStartMs + 100);
  // All ready before anyone takes them, however fast the fire path is.
  ASSERT_TRUE(WaitForReady("t", kJobs));
  std::vector<Sub> subs;
  {
    // The first round waits for these until all subscribers are in.
    KeyLocks::Guard hold(service().LocksForTesting(), hashes);
    for (int i = 0; i < 4; ++i) subs.push_back(Subscribe("t", 10000));
  }
  ASSERT_TRUE(PollUntil(
      [&] {
        size_t n = 0;
        for (const Sub& sub : subs) n += sub.sink->count();
        return n >= kJobs;
      },
      kWait, absl::Milliseconds(1)));
  size_t largest = 0;
  for (const Sub& sub : subs) {
    for (size_t n : sub.sink->sends()) largest = std::max(largest, n);
    EXPECT_GE(sub.sink->count(), 7438u);  // 8750 within 15%
    EXPECT_LE(sub.sink->count(), 10062u);
  }
  EXPECT_EQ(largest, Dispatcher::kMaxRound);
}

// One job ready at a time, acked at once (a few hundred jobs/s): the share
// must stay even too. Before, Reserve took credit round-robin for a whole
// chunk, the unused credit went back but the cursor stayed past it, so with
// 3 subscribers of credit 50 every round started at the same one: 900 jobs
// went 900/0/0.
TEST_F(DelivererTest, ThreeSubscribersShareJobsThatComeOneAtATime) {
  service().Start();
  std::vector<Sub> subs = {Subscribe("t", 50), Subscribe("t", 50),
                           Subscribe("t", 50)};
  constexpr int kJobs = 900;
  for (int i = 0; i < kJobs; ++i) {
    MustSchedule("t", absl::StrCat("j", i), 100 + 3 * i);
  }
  size_t received = 0;
  for (int i = 0; i < kJobs; ++i) {
    clock_.SetMs(kStartMs + 100 + 3 * i);
    ASSERT_TRUE(PollUntil(
        [&] {
          size_t n = 0;
          for (const Sub& sub : subs) n += sub.sink->count();
          return n == received + 1;
        },
        kWait, absl::Microseconds(100)))
        << "job " << i;
    ++received;
    for (const Sub& sub : subs) {
      const std::vector<v1::Delivery> got = sub.sink->received();
      if (!got.empty() && got.back().job().id() == absl::StrCat("j", i)) {
        ASSERT_EQ(AckCode(got.back().ack_token()), absl::StatusCode::kOk);
      }
    }
  }
  for (const Sub& sub : subs) {
    EXPECT_GE(sub.sink->count(), 255u);  // 300 within 15%
    EXPECT_LE(sub.sink->count(), 345u);
  }
}

// What is ready in one dispatch round goes to each subscriber's sink in one
// Send (one stream message), and a lone job goes out alone, at once.
TEST_F(DelivererTest, ReadyJobsGoToEachSinkInOneSendAndALoneOneAlone) {
  service().Start();
  Sub a = Subscribe("t", 100);
  Sub b = Subscribe("t", 100);
  for (int i = 0; i < 20; ++i) MustSchedule("t", absl::StrCat("j", i), 1000);
  Quiesce();
  clock_.SetMs(kStartMs + 1000);
  ASSERT_TRUE(PollUntil([&] { return a.sink->count() + b.sink->count() == 20; },
                        kWait));
  EXPECT_THAT(a.sink->sends(), ElementsAre(10));
  EXPECT_THAT(b.sink->sends(), ElementsAre(10));
  MustSchedule("t", "lone", 1000);
  Quiesce();
  clock_.SetMs(kStartMs + 2000);
  ASSERT_TRUE(PollUntil([&] { return a.sink->count() + b.sink->count() == 21; },
                        kWait));
  std::vector<size_t> sends = a.sink->sends();
  for (size_t n : b.sink->sends()) sends.push_back(n);
  EXPECT_THAT(sends, ::testing::UnorderedElementsAre(10, 10, 1));
}

// A backlog goes out in rounds that double, from Dispatcher::kChunk up to
// kMaxRound; the round that empties the queue sets the next backlog back
// to kChunk, so that its first jobs leave as soon as before.
TEST_F(DelivererTest, ABacklogGoesInGrowingRoundsAndTheNextStartsSmall) {
  constexpr size_t kFirst = Dispatcher::kChunk;
  constexpr size_t kMax = Dispatcher::kMaxRound;
  static_assert(kMax == 4 * kFirst);
  service().Start();
  const size_t backlog = kFirst + 2 * kFirst + kMax + kMax + 100;
  // Due at one later millisecond, read once by the fire path. (Due now,
  // each would fire on its own, and each fire reads the millisecond's
  // whole due index: quadratic, 10 s under ASan on a busy box.)
  for (size_t i = 0; i < backlog; ++i) {
    MustSchedule("t", absl::StrCat("j", i), 100);
  }
  Quiesce();
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(WaitForReady("t", static_cast<int64_t>(backlog)));
  // Credit for the backlog and one more, so that the last round (100) is
  // bound by the queue, not by credit.
  Sub sub = Subscribe("t", static_cast<uint32_t>(backlog + 1));
  ASSERT_TRUE(sub.sink->WaitFor(backlog));
  EXPECT_THAT(sub.sink->sends(),
              ElementsAre(kFirst, 2 * kFirst, kMax, kMax, 100));
  // The next backlog falls due while the subscriber has credit for one
  // job: that one goes alone. (The fire path readies a millisecond in
  // chunks, the first one small, so credit holds the rest back until all
  // of it is ready.) One Ack then frees credit for all of it at once: its
  // rounds start at kChunk again.
  const size_t next = kFirst + 10;
  for (size_t i = 0; i < next; ++i) {
    MustSchedule("t", absl::StrCat("k", i), 1000);
  }
  Quiesce();
  clock_.SetMs(kStartMs + 100 + 1000);
  ASSERT_TRUE(WaitForReady("t", static_cast<int64_t>(next - 1)));
  Quiesce();
  ASSERT_EQ(sub.sink->count(), backlog + 1);
  std::vector<std::string> tokens;
  for (size_t i = 0; i < 2 * next; ++i) {
    tokens.push_back(sub.sink->at(i).ack_token());
  }
  EXPECT_THAT(AckCodes(std::move(tokens)),
              ::testing::Each(absl::StatusCode::kOk));
  ASSERT_TRUE(sub.sink->WaitFor(backlog + next));
  EXPECT_THAT(sub.sink->sends(),
              ElementsAre(kFirst, 2 * kFirst, kMax, kMax, 100, 1, kFirst, 9));
  EXPECT_EQ(Counts("t").in_flight,
            static_cast<int64_t>(backlog + next - 2 * next));
}

// A herd (many jobs due at one millisecond) is readied in chunks: the first
// chunk is delivered while the fire path still reads the due index. Before,
// nothing was readied until the whole millisecond had been read and locked.
TEST_F(DelivererTest, AHerdIsDeliveredWhileItsLaterChunksAreRead) {
  service().Start();
  Sub sub = Subscribe("t", 10000);
  constexpr size_t kJobs = 3 * FirePath::kChunk;
  for (size_t i = 0; i < kJobs; ++i) {
    MustSchedule("t", absl::StrCat("j", i), 1000);
  }
  Quiesce();
  // The scan of the due index stalls two chunks in until a delivery came
  // (at most kWait).
  std::atomic<bool> delivered_meanwhile{false};
  store_.StallScanDue([&](size_t index) {
    if (index == 2 * FirePath::kChunk) {
      delivered_meanwhile = PollUntil([&] { return sub.sink->count() > 0; },
                                      kWait, absl::Milliseconds(1));
    }
  });
  clock_.SetMs(kStartMs + 1000);
  ASSERT_TRUE(PollUntil([&] { return sub.sink->count() == kJobs; }, kWait * 2));
  store_.StallScanDue(nullptr);
  EXPECT_TRUE(delivered_meanwhile);
  EXPECT_EQ(Counts("t").in_flight, static_cast<int64_t>(kJobs));
}

// A job canceled while a herd's due index is being read: the scan, begun
// before, still lists it; the read of its chunk under the keys' locks must
// drop it, so it is never readied or counted as fired.
TEST_F(DelivererTest, AJobCanceledDuringAHerdsScanIsNotReadied) {
  service().Start();
  constexpr size_t kJobs = 3 * FirePath::kChunk;
  for (size_t i = 0; i < kJobs; ++i) {
    MustSchedule("t", absl::StrCat("j", i), 1000);
  }
  Quiesce();
  store_.StallScanDue([&](size_t index) {
    if (index == 2 * FirePath::kChunk) {
      EXPECT_OK(service().Cancel(CancelReq("t", "j999")));  // last in order
    }
  });
  clock_.SetMs(kStartMs + 1000);
  ASSERT_TRUE(WaitForReady("t", static_cast<int64_t>(kJobs - 1)));
  Quiesce();
  store_.StallScanDue(nullptr);
  EXPECT_EQ(Counts("t").ready, static_cast<int64_t>(kJobs - 1));
  EXPECT_EQ(Counts("t").live, static_cast<int64_t>(kJobs - 1));
}

TEST_F(DelivererTest, CreditBoundsEachSubscriberAndASlowOneHoldsBackNobody) {
  service().Start();
  Sub slow = Subscribe("t", 2);  // never acks
  Sub fast = Subscribe("t", 100);
  for (int i = 0; i < 50; ++i) MustSchedule("t", absl::StrCat("j", i), 0);
  ASSERT_TRUE(fast.sink->WaitFor(48));
  Quiesce();
  EXPECT_EQ(slow.sink->count(), 2u);
  EXPECT_EQ(fast.sink->count(), 48u);
  // Freed credit brings the next job.
  MustSchedule("t", "late", 0);
  ASSERT_TRUE(fast.sink->WaitFor(49));
  EXPECT_EQ(AckCode(slow.sink->at(0).ack_token()), absl::StatusCode::kOk);
  MustSchedule("t", "later", 0);
  MustSchedule("t", "latest", 0);
  Quiesce();
  EXPECT_EQ(slow.sink->count() + fast.sink->count(), 53u);
  EXPECT_LE(slow.sink->count(), 3u);
}

TEST_F(DelivererTest, NeverEarlyWhenTheWallClockStepsBack) {
  service().Start();
  MustSchedule("t", "a", 500);
  clock_.SetMs(kStartMs + 500);
  ASSERT_TRUE(WaitForReady("t", 1));  // fired, no subscriber yet
  clock_.SetMs(kStartMs + 100);       // the wall clock steps back
  Sub sub = Subscribe("t");
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
  EXPECT_EQ(Counts("t").ready, 0);  // waits for its time again
  SettleAt(kStartMs + 499, kStartMs + 500);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
  clock_.SetMs(kStartMs + 500);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  EXPECT_EQ(sub.sink->at(0).job().id(), "a");
}

TEST_F(DelivererTest, AWallClockStepForwardDeliversWhatBecameDue) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "in-1h", 3'600'000);
  MustSchedule("t", "in-2h", 2 * 3'600'000);
  MustSchedule("t", "in-5h", 5 * 3'600'000);
  clock_.SetMs(kStartMs + 3 * 3'600'000);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 2u);
  EXPECT_EQ(Counts("t").scheduled(), 1);
}

TEST_F(DelivererTest, StreamEndRedeliversAtOnceToAnotherWithTheNextAttempt) {
  service().Start();
  Sub first = Subscribe("t", 100);
  for (int i = 0; i < 5; ++i) MustSchedule("t", absl::StrCat("j", i), 0);
  ASSERT_TRUE(first.sink->WaitFor(5));
  Sub second = Subscribe("t", 100);
  deliverer().Unsubscribe(first.id, "subscriber stream ended");
  ASSERT_TRUE(second.sink->WaitFor(5));
  for (const v1::Delivery& d : second.sink->received()) {
    EXPECT_EQ(d.attempt(), 2u);
    EXPECT_EQ(d.job().last_error(), "subscriber stream ended");
    EXPECT_EQ(d.job().fire_at().seconds(), clock_.NowMs() / 1000);
  }
  for (const v1::Delivery& d : first.sink->received()) {
    EXPECT_EQ(AckCode(d.ack_token()), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(Stats("t").subscribers(), 1u);
  EXPECT_EQ(Counts("t").in_flight, 5);
}

TEST_F(DelivererTest, StreamEndWithNoOtherSubscriberLeavesTheJobsReady) {
  service().Start();
  Sub only = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(only.sink->WaitFor(1));
  deliverer().Unsubscribe(only.id, "subscriber stream ended");
  ASSERT_TRUE(WaitForReady("t", 1));
  EXPECT_EQ(Counts("t").in_flight, 0);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_READY);
  EXPECT_EQ(job.attempts(), 1u);
  Sub next = Subscribe("t");
  ASSERT_TRUE(next.sink->WaitFor(1));
  EXPECT_EQ(next.sink->at(0).attempt(), 2u);
}

TEST_F(DelivererTest, AfterARestartInFlightJobsAreDeliveredAgain) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  MustSchedule("t", "b", 0);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  const std::string old_token = sub.sink->at(0).ack_token();
  clock_.AdvanceMs(1000);
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  ASSERT_TRUE(WaitForReady("t", 2));
  Sub again = Subscribe("t");
  ASSERT_TRUE(again.sink->WaitFor(2));
  for (const v1::Delivery& d : again.sink->received()) {
    EXPECT_EQ(d.attempt(), 2u);
    EXPECT_EQ(d.job().attempts(), 2u);
  }
  EXPECT_EQ(AckCode(old_token), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(AckCode(again.sink->at(0).ack_token()), absl::StatusCode::kOk);
}

TEST_F(DelivererTest, ReadyJobsSurviveARestartAndGoToTheFirstSubscriber) {
  MustSchedule("t", "a", 0);
  MustSchedule("t", "b", 200);
  service().Start();
  ASSERT_TRUE(WaitForReady("t", 1));
  Restart();
  clock_.SetMs(kStartMs + 300);
  ASSERT_OK(service().Recover());
  service().Start();
  Sub sub = Subscribe("t");
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(0).attempt(), 1u);
}

TEST_F(DelivererTest, DeadCountIsRebuiltAfterARestart) {
  PutRecord("t", "d1", v1::JOB_STATE_DEAD, kStartMs);
  PutRecord("t", "d2", v1::JOB_STATE_DEAD, kStartMs);
  PutRecord("u", "d3", v1::JOB_STATE_DEAD, kStartMs);
  MustSchedule("t", "live", 1000);
  Restart();
  ASSERT_OK(service().Recover());
  EXPECT_EQ(Counts("t").dead, 0);  // Recover reads only the due index
  service().Start();
  ASSERT_TRUE(PollUntil(
      [&] { return Stats("t").dead() == 2 && Stats("u").dead() == 1; }, kWait,
      absl::Milliseconds(1)));
  ASSERT_OK(service().Cancel(CancelReq("t", "d1")));
  EXPECT_EQ(Stats("t").dead(), 1u);
  EXPECT_EQ(Stats("t").scheduled(), 1u);
}

TEST_F(DelivererTest, DeadCountScanIsExactWhileJobsChange) {
  for (int i = 0; i < 300; ++i) {
    PutRecord("t", absl::StrCat("d", i), v1::JOB_STATE_DEAD, kStartMs);
  }
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  // Redrive and cancel DEAD jobs while the scan may be running.
  v1::RedriveRequest redrive;
  redrive.set_topic("t");
  redrive.set_id_prefix("d1");  // d1, d10-d19, d100-d199: 111 jobs
  ASSERT_OK_AND_ASSIGN(v1::RedriveResponse r, service().Redrive(redrive));
  EXPECT_EQ(r.redriven(), 111u);
  ASSERT_OK(service().Cancel(CancelReq("t", "d2")));
  Quiesce();
  ASSERT_TRUE(PollUntil([&] { return Stats("t").dead() == 188; }, kWait,
                        absl::Milliseconds(1)))
      << Stats("t").DebugString();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(Stats("t").dead(), 188u);
}

TEST_F(DelivererTest, SubscribeRefusesBadInput) {
  v1::SubscribeRequest req;
  req.set_topic("bad topic");
  auto sink = std::make_shared<FakeSink>(&clock_);
  ExpectInvalid(deliverer().Subscribe(req, sink).status(), "topic");
  req.set_topic("t");
  req.set_max_in_flight(10001);
  absl::Status s = deliverer().Subscribe(req, sink).status();
  ExpectInvalid(s, "max_in_flight");
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("1-10000"));
  req.set_max_in_flight(0);
  req.set_consumer(std::string(129, 'c'));
  ExpectInvalid(deliverer().Subscribe(req, sink).status(), "consumer");
  EXPECT_EQ(Stats("t").subscribers(), 0u);
}

TEST_F(DelivererTest, ZeroMaxInFlightMeansTheDefault) {
  service().Start();
  Sub sub = Subscribe("t", 0);
  for (int i = 0; i < 120; ++i) MustSchedule("t", absl::StrCat("j", i), 0);
  ASSERT_TRUE(sub.sink->WaitFor(100));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 100u);
  EXPECT_EQ(Counts("t").ready, 20);
}

TEST_F(DelivererTest, CloseAllEndsStreamsAndRefusesNewSubscribers) {
  service().Start();
  Sub sub = Subscribe("t");
  deliverer().CloseAll(absl::UnavailableError("server is shutting down"));
  ASSERT_TRUE(sub.sink->closed().has_value());
  EXPECT_EQ(sub.sink->closed()->code(), absl::StatusCode::kUnavailable);
  v1::SubscribeRequest req;
  req.set_topic("t");
  EXPECT_EQ(deliverer()
                .Subscribe(req, std::make_shared<FakeSink>(&clock_))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  MustSchedule("t", "a", 0);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
}

TEST_F(DelivererTest, DispatchWriteFailureKeepsTheJobReadyAndRetries) {
  service().Start();
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(WaitForReady("t", 1));
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  Sub sub = Subscribe("t");
  ASSERT_TRUE(sub.sink->WaitFor(1));
  EXPECT_EQ(sub.sink->at(0).attempt(), 1u);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
}

}  // namespace
}  // namespace delayd::server::testing
