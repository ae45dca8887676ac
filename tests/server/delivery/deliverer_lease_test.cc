// Deliverer: how deliveries end — Ack (per-token results, stale and forged
// tokens), Nack (retry_after, exponential backoff, max_attempts, dead
// letters), lease expiry and ExtendLease, Redrive, cancel in flight and
// REPLACE of a job in flight — by the fake clock.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/delivery/ack_token.h"
#include "server/delivery/deliverer.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::ElementsAre;

TEST(BackoffTest, GrowsByTheMultiplierUpToTheCap) {
  const v1::RetryPolicy retry = Retry(10, 1000, 1000, 10'000, 2);
  EXPECT_EQ(BackoffMs(retry, 1), 1000);
  EXPECT_EQ(BackoffMs(retry, 2), 2000);
  EXPECT_EQ(BackoffMs(retry, 3), 4000);
  EXPECT_EQ(BackoffMs(retry, 4), 8000);
  EXPECT_EQ(BackoffMs(retry, 5), 10'000);
  EXPECT_EQ(BackoffMs(retry, 1000), 10'000);
}

TEST_F(DelivererTest, AckDeletesTheJobAndFreesCredit) {
  service().Start();
  Sub sub = Subscribe("t", 1);
  MustSchedule("t", "a", 0);
  MustSchedule("t", "b", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);  // credit 1
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  EXPECT_FALSE(Stored("t", sub.sink->at(0).job().id()).has_value());
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(AckCode(sub.sink->at(1).ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(Counts("t").in_flight, 0);
  int due_entries = 0;
  ASSERT_OK(memory_.ScanDue(0, INT64_MAX, [&](int64_t, auto, auto) {
    ++due_entries;
    return true;
  }));
  EXPECT_EQ(due_entries, 0);
}

// One Ack's tokens, of two topics in turn: each topic's in-flight count
// drops by its own acked jobs, and each topic's subscriber gets its credit
// back (its next job goes out).
TEST_F(DelivererTest, AnAckOfTwoTopicsInTurnEndsEachTopicsLeases) {
  service().Start();
  Sub a = Subscribe("a", 2);
  Sub b = Subscribe("b", 3);
  for (int i = 0; i < 3; ++i) MustSchedule("a", absl::StrCat("a", i), 0);
  for (int i = 0; i < 4; ++i) MustSchedule("b", absl::StrCat("b", i), 0);
  ASSERT_TRUE(a.sink->WaitFor(2));
  ASSERT_TRUE(b.sink->WaitFor(3));
  Quiesce();
  ASSERT_EQ(Counts("a").in_flight, 2);
  ASSERT_EQ(Counts("b").in_flight, 3);
  EXPECT_THAT(AckCodes({a.sink->at(0).ack_token(), b.sink->at(0).ack_token(),
                        a.sink->at(1).ack_token(), b.sink->at(1).ack_token(),
                        b.sink->at(2).ack_token(), a.sink->at(1).ack_token()}),
              ::testing::Each(absl::StatusCode::kOk));
  ASSERT_TRUE(a.sink->WaitFor(3));
  ASSERT_TRUE(b.sink->WaitFor(4));
  Quiesce();
  EXPECT_EQ(Counts("a").in_flight, 1);
  EXPECT_EQ(Counts("b").in_flight, 1);
  EXPECT_EQ(Counts("a").live, 1);
  EXPECT_EQ(Counts("b").live, 1);
}

TEST_F(DelivererTest, AckAnswersEachTokenOnItsOwn) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  MustSchedule("t", "b", 0);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  const std::string a = sub.sink->at(0).ack_token();
  const std::string b = sub.sink->at(1).ack_token();
  ASSERT_OK_AND_ASSIGN(AckToken forged, DecodeAckToken("t", a, kMaxTokenChars));
  forged.nonce ^= 1;  // well formed, never issued: stale
  AckToken bad_topic = forged;
  bad_topic.topic = "no spaces allowed";
  EXPECT_THAT(
      AckCodes({a, "garbage!", EncodeAckToken(forged), a,
                EncodeAckToken(bad_topic), "", b}),
      ElementsAre(absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument,
                  absl::StatusCode::kFailedPrecondition,
                  absl::StatusCode::kOk,  // the same token again
                  absl::StatusCode::kInvalidArgument,
                  absl::StatusCode::kInvalidArgument, absl::StatusCode::kOk));
  // Acked: stale now.
  EXPECT_EQ(AckCode(a), absl::StatusCode::kFailedPrecondition);
  v1::AckRequest none;
  ExpectInvalid(service().Ack(none).status(), "ack_tokens");
  v1::AckRequest too_many;
  for (int i = 0; i < 1001; ++i) too_many.add_ack_tokens(a);
  ExpectInvalid(service().Ack(too_many).status(), "ack_tokens");
}

TEST_F(DelivererTest, AckWriteFailureFailsTheCallAndKeepsTheLease) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  v1::AckRequest req;
  req.add_ack_tokens(sub.sink->at(0).ack_token());
  EXPECT_EQ(service().Ack(req).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
}

TEST_F(DelivererTest, LeaseExpiryRedeliversAtOnce) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, Retry(5, 2000));
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const int64_t delivered_at = clock_.NowMs();
  SettleAt(delivered_at + 1999, delivered_at + 2000);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
  clock_.SetMs(delivered_at + 2000);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  const v1::Delivery again = sub.sink->at(1);
  EXPECT_EQ(again.attempt(), 2u);
  EXPECT_EQ(again.job().last_error(), "lease expired");
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(AckCode(again.ack_token()), absl::StatusCode::kOk);
}

// A client that stops reading: its leases expire and their credit returns,
// but the deliveries still wait unwritten in its stream, so it gets no new
// ones (before, each expiry queued max_in_flight more into the stream).
TEST_F(DelivererTest, ASubscriberThatStopsReadingHoldsNoMoreThanItsCredit) {
  service().Start();
  Sub stuck = Subscribe("t", 3);
  stuck.sink->Stall();
  for (int i = 0; i < 12; ++i) {
    MustScheduleWith("t", absl::StrCat("j", i), 100, Retry(100, 1000));
  }
  Quiesce();
  clock_.SetMs(kStartMs + 100);  // all due at once: one Send of 3
  ASSERT_TRUE(PollUntil([&] { return stuck.sink->Unwritten() == 3; }, kWait));
  for (int round = 1; round <= 4; ++round) {
    clock_.SetMs(kStartMs + 100 + round * 1000);  // every lease has expired
    Quiesce();
    EXPECT_EQ(stuck.sink->Unwritten(), 3u) << "round " << round;
  }
  EXPECT_THAT(stuck.sink->sends(), ElementsAre(3));
  EXPECT_EQ(Counts("t").in_flight, 0);
  // A subscriber that reads gets every job; the stuck one still nothing.
  Sub reader = Subscribe("t", 100);
  ASSERT_TRUE(reader.sink->WaitFor(12));
  EXPECT_THAT(stuck.sink->sends(), ElementsAre(3));
}

// Jobs that became ready while the only subscriber's room was taken by an
// unwritten delivery go to it once that delivery is written, with nothing
// else happening in the topic (before, they waited for the topic's next
// event: in the RPC fuzz test, a job nacked with zero backoff before the
// server's OnWriteDone of its delivery was never redelivered).
TEST_F(DelivererTest, JobsReadyWhileADeliveryIsUnwrittenGoOnceItIsWritten) {
  service().Start();
  Sub sub = Subscribe("t", 1);
  sub.sink->Stall();
  MustScheduleWith("t", "a", 100, Retry(100, 1000));
  MustScheduleWith("t", "b", 100, Retry(100, 1000));
  Quiesce();
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(PollUntil([&] { return sub.sink->Unwritten() == 1; }, kWait));
  clock_.SetMs(kStartMs + 1100);  // the lease expired: credit back, room not
  ASSERT_TRUE(PollUntil([&] { return Counts("t").ready == 2; }, kWait));
  Quiesce();
  ASSERT_EQ(sub.sink->sends().size(), 1u);
  ASSERT_EQ(Counts("t").ready, 2);
  sub.sink->Unstall();  // written: the room is free
  EXPECT_TRUE(sub.sink->WaitFor(2));
}

TEST_F(DelivererTest, LeaseExpiryCountsTowardsMaxAttempts) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, Retry(2, 1000));
  ASSERT_TRUE(sub.sink->WaitFor(1));
  clock_.AdvanceMs(1000);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  clock_.AdvanceMs(1000);
  ASSERT_TRUE(WaitForState("t", "a", v1::JOB_STATE_DEAD));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 2u);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job.last_error(), "lease expired");
  EXPECT_EQ(Stats("t").dead(), 1u);
  EXPECT_EQ(Counts("t").live, 0);
}

// A topic's live payload bytes (what the pending_bytes quota counts)
// follow a job on every path out of delivery: an ack deletes it without
// reading the record, taking its size from the lease; a lease expiry with
// no attempt left makes it DEAD; a Cancel in flight ends it.
TEST_F(DelivererTest, LivePayloadBytesFollowAJobOnEveryPathOut) {
  service().Start();
  Sub sub = Subscribe("t", 1);
  MustSchedule("t", "acked", 0, "12345");
  ASSERT_TRUE(sub.sink->WaitFor(1));
  Quiesce();
  EXPECT_EQ(Counts("t").in_flight, 1);
  EXPECT_EQ(Counts("t").live_payload_bytes, 5);  // in flight still counts
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Counts("t").live_payload_bytes, 0);

  MustScheduleWith("t", "dies", 0, Retry(1, 1000));  // payload "p"
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(Counts("t").live_payload_bytes, 1);
  clock_.AdvanceMs(1000);  // the lease expires: out of attempts
  ASSERT_TRUE(WaitForState("t", "dies", v1::JOB_STATE_DEAD));
  Quiesce();
  ASSERT_OK_AND_ASSIGN(v1::Job dead, service().GetJob(GetReq("t", "dies")));
  EXPECT_EQ(dead.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(Counts("t").live_payload_bytes, 0);

  MustSchedule("t", "canceled", 0, "abc");
  ASSERT_TRUE(sub.sink->WaitFor(3));
  EXPECT_EQ(Counts("t").live_payload_bytes, 3);
  v1::CancelRequest cancel;
  cancel.mutable_key()->set_topic("t");
  cancel.mutable_key()->set_id("canceled");
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse canceled, service().Cancel(cancel));
  EXPECT_EQ(canceled.outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  EXPECT_EQ(Counts("t").live_payload_bytes, 0);
  // Its ack, accepted, takes nothing more off.
  EXPECT_EQ(AckCode(sub.sink->at(2).ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Counts("t").live_payload_bytes, 0);
  EXPECT_EQ(Counts("t").live, 0);
}

// CancelAsync sees the lease (the record still says SCHEDULED): the
// delivery stands, and its ack is accepted.
TEST_F(DelivererTest, CancelAsyncOfAJobInFlightLetsTheDeliveryStand) {
  service().Start();
  Sub sub = Subscribe("t", 1);
  MustSchedule("t", "a", 0, "abc");
  ASSERT_TRUE(sub.sink->WaitFor(1));
  Quiesce();
  std::optional<absl::StatusOr<v1::CancelResponse>> canceled =
      RunAsync<v1::CancelResponse>([&](JobWriter::CancelDone& done) {
        return service().CancelAsync(CancelReq("t", "a"), done);
      });
  ASSERT_TRUE(canceled.has_value());
  ASSERT_OK(*canceled);
  EXPECT_EQ((*canceled)->outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  EXPECT_EQ(Stored("t", "a")->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_FALSE(Stored("t", "a").has_value());
}

TEST_F(DelivererTest, ExtendLeaseMovesTheDeadline) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, Retry(5, 1000));
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const std::string token = sub.sink->at(0).ack_token();
  const int64_t t0 = clock_.NowMs();
  v1::ExtendLeaseRequest req;
  req.set_ack_token(token);
  *req.mutable_extend_by() = DurationMs(10'000);
  ASSERT_OK_AND_ASSIGN(v1::ExtendLeaseResponse r, service().ExtendLease(req));
  EXPECT_EQ(Ms(r.lease_expires_at()), t0 + 10'000);
  // The deadline lives in the lease only: nothing was written.
  EXPECT_EQ(Stored("t", "a")->lease_expires_at_ms(), 0);
  SettleAt(t0 + 9'999, t0 + 10'000);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
  clock_.SetMs(t0 + 10'000);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  // The old delivery is stale now; the job is still there.
  EXPECT_EQ(service().ExtendLease(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(AckCode(sub.sink->at(1).ack_token()), absl::StatusCode::kOk);
  // The job is gone.
  req.set_ack_token(sub.sink->at(1).ack_token());
  EXPECT_EQ(service().ExtendLease(req).status().code(),
            absl::StatusCode::kNotFound);
  *req.mutable_extend_by() = DurationMs(0);
  ExpectInvalid(service().ExtendLease(req).status(), "extend_by");
  *req.mutable_extend_by() = DurationMs(12 * 3'600'000 + 1);
  ExpectInvalid(service().ExtendLease(req).status(), "extend_by");
  req.set_ack_token("nope");
  *req.mutable_extend_by() = DurationMs(1000);
  ExpectInvalid(service().ExtendLease(req).status(), "ack_token");
}

// A round's leases share one lease timer: at its deadline each of them
// that is still current is delivered again; one extended meanwhile has a
// timer of its own and goes at its own deadline; one acked is not touched.
TEST_F(DelivererTest, ARoundsLeasesExpireTogetherButAnExtendedOneAtItsOwnTime) {
  for (const char* id : {"a", "b", "c", "d"}) {
    MustScheduleWith("t", id, 0, Retry(5, 2000));
  }
  service().Start();
  ASSERT_TRUE(PollUntil([&] { return Stats("t").ready() == 4; }, kWait));
  Sub sub = Subscribe("t");  // one round takes the four
  ASSERT_TRUE(sub.sink->WaitFor(4));
  EXPECT_EQ(sub.sink->sends(), std::vector<size_t>{4});
  const int64_t t1 = clock_.NowMs();
  std::map<std::string, std::string> tokens;
  for (size_t i = 0; i < 4; ++i) {
    tokens[sub.sink->at(i).job().id()] = sub.sink->at(i).ack_token();
  }
  v1::ExtendLeaseRequest extend;
  extend.set_ack_token(tokens["b"]);
  *extend.mutable_extend_by() = DurationMs(10'000);
  ASSERT_OK(service().ExtendLease(extend).status());
  ASSERT_EQ(AckCode(tokens["d"]), absl::StatusCode::kOk);
  SettleAt(t1 + 1999, t1 + 2000);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 4u);
  clock_.SetMs(t1 + 2000);
  ASSERT_TRUE(sub.sink->WaitFor(6));
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 6u);
  std::vector<std::string> again;
  for (size_t i = 4; i < 6; ++i) {
    EXPECT_EQ(sub.sink->at(i).attempt(), 2u);
    again.push_back(sub.sink->at(i).job().id());
  }
  std::sort(again.begin(), again.end());
  EXPECT_THAT(again, ElementsAre("a", "c"));
  EXPECT_EQ(
      AckCodes({sub.sink->at(4).ack_token(), sub.sink->at(5).ack_token()}),
      std::vector<absl::StatusCode>(2, absl::StatusCode::kOk));
  SettleAt(t1 + 9'999, t1 + 10'000);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 6u);
  clock_.SetMs(t1 + 10'000);
  ASSERT_TRUE(sub.sink->WaitFor(7));
  EXPECT_EQ(sub.sink->at(6).job().id(), "b");
  EXPECT_EQ(sub.sink->at(6).attempt(), 2u);
}

TEST_F(DelivererTest, NackWithRetryAfterRedeliversNoEarlier) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const int64_t t0 = clock_.NowMs();
  ASSERT_OK_AND_ASSIGN(v1::NackResponse r,
                       Nack(sub.sink->at(0).ack_token(), 5000, "busy"));
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Ms(r.job().fire_at()), t0 + 5000);
  EXPECT_EQ(r.job().last_error(), "busy");
  EXPECT_EQ(r.job().attempts(), 1u);
  EXPECT_EQ(Counts("t").in_flight, 0);
  EXPECT_EQ(Counts("t").scheduled(), 1);
  SettleAt(t0 + 4999, t0 + 5000);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
  clock_.SetMs(t0 + 5000);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(1).attempt(), 2u);
  EXPECT_EQ(sub.sink->at(1).job().last_error(), "busy");
  // The nacked token is stale.
  EXPECT_EQ(Nack(sub.sink->at(0).ack_token(), 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Nack("garbage", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExpectInvalid(Nack(sub.sink->at(1).ack_token(), -1).status(), "retry_after");
}

TEST_F(DelivererTest, NackWithoutRetryAfterBacksOffExponentially) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, Retry(10, 30'000, 1000, 3000, 2));
  const std::vector<int64_t> expected = {1000, 2000, 3000, 3000};
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(sub.sink->WaitFor(i + 1));
    const int64_t t0 = clock_.NowMs();
    ASSERT_OK_AND_ASSIGN(v1::NackResponse r,
                         Nack(sub.sink->at(i).ack_token(), std::nullopt));
    EXPECT_EQ(Ms(r.job().fire_at()) - t0, expected[i]) << "attempt " << i + 1;
    SettleAt(t0 + expected[i] - 1, t0 + expected[i]);
    Quiesce();
    EXPECT_EQ(sub.sink->count(), i + 1);
    clock_.SetMs(t0 + expected[i]);
  }
  ASSERT_TRUE(sub.sink->WaitFor(expected.size() + 1));
  EXPECT_EQ(sub.sink->at(expected.size()).attempt(), expected.size() + 1);
}

TEST_F(DelivererTest, MaxAttemptsMakesItDeadAndRedriveBringsItBack) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, Retry(2, 30'000));
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_OK(Nack(sub.sink->at(0).ack_token(), 0, "one"));
  ASSERT_TRUE(sub.sink->WaitFor(2));
  ASSERT_OK_AND_ASSIGN(v1::NackResponse r,
                       Nack(sub.sink->at(1).ack_token(), 0, "two"));
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(r.job().attempts(), 2u);
  EXPECT_EQ(r.job().last_error(), "two");
  EXPECT_FALSE(storage::DueIndexEntryOf(*Stored("t", "a")).has_value());
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 2u);
  v1::TopicStats stats = Stats("t");
  EXPECT_EQ(stats.dead(), 1u);
  EXPECT_EQ(stats.in_flight(), 0u);
  EXPECT_EQ(stats.scheduled() + stats.ready(), 0u);
  v1::ListJobsRequest list;
  list.set_topic("t");
  list.add_states(v1::JOB_STATE_DEAD);
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse dead, service().ListJobs(list));
  ASSERT_EQ(dead.jobs_size(), 1);
  EXPECT_EQ(dead.jobs(0).id(), "a");

  v1::RedriveRequest redrive;
  redrive.set_topic("t");
  ASSERT_OK_AND_ASSIGN(v1::RedriveResponse rr, service().Redrive(redrive));
  EXPECT_EQ(rr.redriven(), 1u);
  ASSERT_TRUE(sub.sink->WaitFor(3));
  EXPECT_EQ(sub.sink->at(2).attempt(), 1u);
  EXPECT_EQ(Stats("t").dead(), 0u);
  ASSERT_OK_AND_ASSIGN(rr, service().Redrive(redrive));
  EXPECT_EQ(rr.redriven(), 0u);
  redrive.set_topic("");
  ExpectInvalid(service().Redrive(redrive).status(), "topic");
}

TEST_F(DelivererTest, NackToTheDeadLettersIsImmediate) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_OK_AND_ASSIGN(v1::NackResponse r,
                       Nack(sub.sink->at(0).ack_token(), std::nullopt,
                            std::string(2000, 'x'), /*dead_letter=*/true));
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(r.job().last_error().size(), limits_.max_reason_bytes);
  EXPECT_EQ(Stats("t").dead(), 1u);
}

TEST_F(DelivererTest, CancelInFlightAcceptsTheAckAndNeverRedelivers) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  EXPECT_EQ(Counts("t").in_flight, 0);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  EXPECT_FALSE(Stored("t", "a").has_value());
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
}

TEST_F(DelivererTest, CancelInFlightThenLeaseExpiryOrStreamEndDeletesIt) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "expires", 0, Retry(5, 1000));
  MustScheduleWith("t", "stream-ends", 0, Retry(5, 60'000));
  ASSERT_TRUE(sub.sink->WaitFor(2));
  ASSERT_OK(service().Cancel(CancelReq("t", "expires")));
  ASSERT_OK(service().Cancel(CancelReq("t", "stream-ends")));
  Sub other = Subscribe("t");
  clock_.AdvanceMs(1000);
  deliverer().Unsubscribe(sub.id, "subscriber stream ended");
  Quiesce();
  EXPECT_FALSE(Stored("t", "expires").has_value());
  EXPECT_FALSE(Stored("t", "stream-ends").has_value());
  EXPECT_EQ(other.sink->count(), 0u);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(Counts("t").in_flight, 0);
}

TEST_F(DelivererTest, CancelOfAJobInFlightBeforeARestartLeavesNoRecord) {
  PutRecord("t", "flying", v1::JOB_STATE_IN_FLIGHT, kStartMs - 5);
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "flying")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  Quiesce();
  EXPECT_FALSE(Stored("t", "flying").has_value());
  Sub sub = Subscribe("t");
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
}

TEST_F(DelivererTest, ReplaceOfAJobInFlightSupersedesTheDelivery) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0, "v1");
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_OK(service().Schedule(
      ScheduleReq("t", "a", 100, "v2", v1::IF_EXISTS_REPLACE)));
  EXPECT_EQ(Counts("t").in_flight, 0);
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stored("t", "a")->job().payload(), "v2");
  clock_.AdvanceMs(100);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(1).job().payload(), "v2");
  EXPECT_EQ(sub.sink->at(1).attempt(), 1u);
}

}  // namespace
}  // namespace delayd::server::testing
