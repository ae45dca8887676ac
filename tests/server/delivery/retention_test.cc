// --retention, without a network: acked jobs kept as DONE, canceled ones as
// CANCELED, what Cancel, Schedule, Reschedule, GetJob, ListJobs and GetStats
// make of them, the Sweeper deleting them when they expire (fake clock), and
// all of it across a restart. Without retention nothing is kept.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/jobs_collector.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kRetentionMs = 2000;

class RetentionTest : public DelivererTest {
 protected:
  RetentionTest() {
    retention_ = absl::Milliseconds(kRetentionMs);
    Restart();
  }

  // Schedules (t, id) due now, delivers it to `sub` and returns the delivery.
  v1::Delivery Deliver(const Sub& sub, const std::string& id,
                       int64_t lease_ms = 30'000) {
    const size_t before = sub.sink->count();
    v1::RetryPolicy retry;
    *retry.mutable_lease() = DurationMs(lease_ms);
    MustScheduleWith("t", id, 0, retry);
    EXPECT_TRUE(sub.sink->WaitFor(before + 1));
    return sub.sink->at(before);
  }

  // The expiry entries of the store, as "ms topic/id".
  std::vector<std::string> ExpiryEntries() {
    std::vector<std::string> out;
    EXPECT_OK(memory_.ScanExpiry(
        0, INT64_MAX,
        [&](int64_t ms, std::string_view topic, std::string_view id) {
          out.push_back(absl::StrCat(ms, " ", AsAbsl(topic), "/", AsAbsl(id)));
          return true;
        }));
    return out;
  }

  // Moves the clock to just before `expires_ms`, checks that (t, id) is
  // still there once the sweeper sleeps until `expires_ms`, then moves the
  // clock there and waits (real time, short deadline) until it is gone.
  void ExpireAt(int64_t expires_ms, const std::string& id) {
    clock_.SetMs(expires_ms - 1);
    ASSERT_TRUE(clock_.AwaitWaiter(expires_ms, kWait))
        << "the sweeper never slept until " << expires_ms;
    EXPECT_TRUE(Stored("t", id).has_value()) << "swept early";
    // The sweeper deletes, then counts what it deleted (the terminal-state
    // counts, then swept()): wait for the whole round, not the delete alone.
    const int64_t swept = service().sweeper().swept();
    clock_.SetMs(expires_ms);
    ASSERT_TRUE(PollUntil(
        [&] {
          return !Stored("t", id).has_value() &&
                 service().sweeper().swept() > swept;
        },
        kWait, absl::Milliseconds(1)))
        << id << " was never swept";
  }

  absl::StatusOr<v1::ListJobsResponse> List(v1::JobState state) {
    v1::ListJobsRequest req;
    req.set_topic("t");
    req.add_states(state);
    return service().ListJobs(req);
  }
};

TEST_F(RetentionTest, AckKeepsTheJobAsDoneThenTheSweeperDeletesIt) {
  service().Start();
  Sub sub = Subscribe("t");
  const v1::Delivery d = Deliver(sub, "a");
  clock_.SetMs(kStartMs + 100);
  ASSERT_EQ(AckCode(d.ack_token()), absl::StatusCode::kOk);

  const std::optional<storage::JobRecord> stored = Stored("t", "a");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(Ms(stored->job().updated_at()), kStartMs + 100);  // finished
  EXPECT_EQ(stored->expires_at_ms(), kStartMs + 100 + kRetentionMs);
  EXPECT_EQ(storage::DueIndexEntryOf(*stored), std::nullopt);
  EXPECT_THAT(ExpiryEntries(),
              ElementsAre(absl::StrCat(kStartMs + 100 + kRetentionMs, " t/a")));
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.attempts(), 1u);
  EXPECT_EQ(Ms(job.updated_at()), kStartMs + 100);
  v1::TopicStats stats = Stats("t");
  EXPECT_EQ(stats.done(), 1u);
  EXPECT_EQ(stats.in_flight(), 0u);
  EXPECT_EQ(stats.scheduled(), 0u);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(service().timers_pending(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse done, List(v1::JOB_STATE_DONE));
  ASSERT_EQ(done.jobs_size(), 1);
  EXPECT_EQ(done.jobs(0).id(), "a");
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse live,
                       List(v1::JOB_STATE_SCHEDULED));
  EXPECT_EQ(live.jobs_size(), 0);

  // Cancel: ALREADY_DONE with the job; nothing changes.
  const std::string before = State();
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_ALREADY_DONE);
  EXPECT_EQ(c.job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(c.job().id(), "a");
  // Reschedule: refused, naming the state.
  absl::StatusOr<v1::RescheduleResponse> r =
      service().Reschedule(RescheduleAtReq("t", "a", kStartMs + 5000));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("is JOB_STATE_DONE"));
  EXPECT_EQ(State(), before);

  // Expiry: not a millisecond early, then gone.
  ASSERT_NO_FATAL_FAILURE(ExpireAt(kStartMs + 100 + kRetentionMs, "a"));
  EXPECT_EQ(service().GetJob(GetReq("t", "a")).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(c, service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_TRUE(ExpiryEntries().empty());
  EXPECT_EQ(Stats("t").done(), 0u);
  EXPECT_EQ(service().sweeper().swept(), 1);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);
}

TEST_F(RetentionTest, ScheduleOfADoneIdRetriesIdempotentlyAndReplaceRunsAgain) {
  service().Start();
  Sub sub = Subscribe("t");
  const v1::ScheduleRequest original = ScheduleReq("t", "a", 0, "p");
  ASSERT_OK(service().Schedule(original));
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  const std::string done_state = State();

  // The same request again (a client retrying after a lost reply): the DONE
  // job, not a second run.
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse retry,
                       service().Schedule(original));
  EXPECT_FALSE(retry.created());
  EXPECT_EQ(retry.job().state(), v1::JOB_STATE_DONE);
  // KEEP: the DONE job too.
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse keep,
                       service().Schedule(ScheduleReq("t", "a", 0, "other",
                                                      v1::IF_EXISTS_KEEP)));
  EXPECT_FALSE(keep.created());
  EXPECT_EQ(keep.job().state(), v1::JOB_STATE_DONE);
  // FAIL with a different spec: ALREADY_EXISTS naming the state.
  absl::StatusOr<v1::ScheduleResponse> other =
      service().Schedule(ScheduleReq("t", "a", 0, "other"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("JOB_STATE_DONE"));
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("IF_EXISTS_REPLACE"));
  Quiesce();
  EXPECT_EQ(State(), done_state);
  EXPECT_EQ(sub.sink->count(), 1u);

  // REPLACE: a new job under the id, delivered again.
  clock_.SetMs(kStartMs + 50);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse replaced,
                       service().Schedule(ScheduleReq("t", "a", 0, "v2",
                                                      v1::IF_EXISTS_REPLACE)));
  EXPECT_TRUE(replaced.created());
  EXPECT_EQ(Ms(replaced.job().created_at()), kStartMs + 50);
  EXPECT_EQ(replaced.job().attempts(), 0u);
  EXPECT_TRUE(ExpiryEntries().empty());
  EXPECT_EQ(Stats("t").done(), 0u);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  EXPECT_EQ(sub.sink->at(1).job().payload(), "v2");
  EXPECT_EQ(sub.sink->at(1).attempt(), 1u);
}

TEST_F(RetentionTest, CancelKeepsTheJobAsCanceledAndItNeverFires) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "c", 1000);
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "c")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(c.job().state(), v1::JOB_STATE_CANCELED);
  const std::optional<storage::JobRecord> stored = Stored("t", "c");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_EQ(stored->expires_at_ms(), kStartMs + kRetentionMs);
  EXPECT_EQ(storage::DueIndexEntryOf(*stored), std::nullopt);
  EXPECT_EQ(service().timers_pending(), 0u);
  EXPECT_EQ(Stats("t").canceled(), 1u);
  EXPECT_EQ(Stats("t").scheduled(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse canceled,
                       List(v1::JOB_STATE_CANCELED));
  ASSERT_EQ(canceled.jobs_size(), 1);

  // A repeated Cancel: CANCELED again, nothing written (the expiry stays).
  const std::string before = State();
  clock_.SetMs(kStartMs + 10);
  ASSERT_OK_AND_ASSIGN(c, service().Cancel(CancelReq("t", "c")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(c.job().state(), v1::JOB_STATE_CANCELED);
  absl::StatusOr<v1::RescheduleResponse> r =
      service().Reschedule(RescheduleAtReq("t", "c", kStartMs + 500));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("is JOB_STATE_CANCELED"));
  // The identical Schedule again does not bring it back.
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse retry,
                       service().Schedule(ScheduleReq("t", "c", 1000)));
  EXPECT_FALSE(retry.created());
  EXPECT_EQ(retry.job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_EQ(State(), before);

  // Past its due time: never delivered. Then swept.
  SettleAt(kStartMs + 1500, kStartMs + kRetentionMs);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpireAt(kStartMs + kRetentionMs, "c"));
  EXPECT_EQ(Stats("t").canceled(), 0u);
}

TEST_F(RetentionTest, CancelOfADeadJobKeepsItAsCanceled) {
  PutRecord("t", "d", v1::JOB_STATE_DEAD, kStartMs);
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  ASSERT_TRUE(PollUntil([&] { return Stats("t").dead() == 1; }, kWait,
                        absl::Milliseconds(1)));
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "d")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(Stored("t", "d")->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_EQ(Stats("t").dead(), 0u);
  EXPECT_EQ(Stats("t").canceled(), 1u);
}

TEST_F(RetentionTest, CanceledInFlightBecomesDoneWhenAckedCanceledOtherwise) {
  service().Start();
  Sub sub = Subscribe("t");
  const v1::Delivery acked = Deliver(sub, "acked");
  const v1::Delivery expires = Deliver(sub, "expires", 1000);
  for (const char* id : {"acked", "expires"}) {
    ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                         service().Cancel(CancelReq("t", id)));
    EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
    // Not retained yet: the delivery stands.
    EXPECT_EQ(Stored("t", id)->expires_at_ms(), 0);
  }
  EXPECT_TRUE(ExpiryEntries().empty());
  EXPECT_EQ(Stats("t").canceled(), 2u);
  EXPECT_EQ(Stats("t").in_flight(), 0u);
  // With retention on, the id stays taken meanwhile.
  ASSERT_OK_AND_ASSIGN(
      v1::ScheduleResponse retry,
      service().Schedule(ScheduleReq("t", "acked", 0, "", v1::IF_EXISTS_KEEP)));
  EXPECT_FALSE(retry.created());
  EXPECT_EQ(retry.job().state(), v1::JOB_STATE_CANCELED);

  // Acked: the work was done.
  clock_.SetMs(kStartMs + 200);
  ASSERT_EQ(AckCode(acked.ack_token()), absl::StatusCode::kOk);
  EXPECT_EQ(Stored("t", "acked")->job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(Stored("t", "acked")->expires_at_ms(),
            kStartMs + 200 + kRetentionMs);
  // The lease of the other ends unacked: kept as CANCELED, not redelivered.
  clock_.SetMs(kStartMs + 1000);
  ASSERT_TRUE(
      PollUntil([&] { return Stored("t", "expires")->expires_at_ms() != 0; },
                kWait, absl::Milliseconds(1)))
      << "the lease never ended";
  EXPECT_EQ(Stored("t", "expires")->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_EQ(Stored("t", "expires")->expires_at_ms(),
            kStartMs + 1000 + kRetentionMs);
  EXPECT_EQ(AckCode(expires.ack_token()),
            absl::StatusCode::kFailedPrecondition);
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 2u);
  const v1::TopicStats stats = Stats("t");
  EXPECT_EQ(stats.done(), 1u);
  EXPECT_EQ(stats.canceled(), 1u);
  EXPECT_EQ(stats.in_flight(), 0u);
}

TEST_F(RetentionTest, RetainedJobsSurviveARestartUnarmedAndAreSweptAfterIt) {
  service().Start();
  Sub sub = Subscribe("t");
  const v1::Delivery d = Deliver(sub, "done");
  ASSERT_EQ(AckCode(d.ack_token()), absl::StatusCode::kOk);
  MustSchedule("t", "canceled", 60'000);
  ASSERT_OK(service().Cancel(CancelReq("t", "canceled")));
  MustSchedule("t", "live", 60'000);
  clock_.SetMs(kStartMs + 500);

  Restart();
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats recovered,
                       service().Recover());
  EXPECT_EQ(recovered.jobs, 1);  // only the live job; retained ones unarmed
  EXPECT_EQ(service().timers_pending(), 1u);
  service().Start();
  ASSERT_TRUE(PollUntil(
      [&] { return Stats("t").done() == 1 && Stats("t").canceled() == 1; },
      kWait, absl::Milliseconds(1)))
      << Stats("t").DebugString();
  EXPECT_EQ(Stats("t").scheduled(), 1u);
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "done")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_ALREADY_DONE);

  ASSERT_NO_FATAL_FAILURE(ExpireAt(kStartMs + kRetentionMs, "canceled"));
  EXPECT_FALSE(Stored("t", "done").has_value());  // both expired then
  EXPECT_TRUE(Stored("t", "live").has_value());
  EXPECT_EQ(Stats("t").done(), 0u);
  EXPECT_EQ(Stats("t").canceled(), 0u);
  EXPECT_EQ(Stats("t").scheduled(), 1u);
}

TEST_F(RetentionTest, RecordsKeptUnderAnEarlierRetentionExpireWithItOff) {
  service().Start();
  MustSchedule("t", "c", 60'000);
  ASSERT_OK(service().Cancel(CancelReq("t", "c")));
  retention_ = absl::ZeroDuration();
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  ASSERT_NO_FATAL_FAILURE(ExpireAt(kStartMs + kRetentionMs, "c"));
}

TEST_F(RetentionTest, EachSweepPassIsBoundedAndGoesInExpiryOrder) {
  // Not started: the test drives the passes.
  for (int i = 0; i < 600; ++i) {
    MustSchedule("t", absl::StrCat("j", i), 60'000);
    clock_.SetMs(kStartMs + 600 - i);  // later ids expire sooner
    ASSERT_OK(service().Cancel(CancelReq("t", absl::StrCat("j", i))));
  }
  Sweeper& sweeper = service().sweeper();
  const int64_t last_expiry = kStartMs + 600 + kRetentionMs;
  ASSERT_OK_AND_ASSIGN(size_t taken, sweeper.SweepOnce(last_expiry - 300, 256));
  EXPECT_EQ(taken, 256u);
  // The 256 soonest to expire are gone: j599 ... j344.
  EXPECT_FALSE(Stored("t", "j344").has_value());
  EXPECT_TRUE(Stored("t", "j343").has_value());
  ASSERT_OK_AND_ASSIGN(taken, sweeper.SweepOnce(last_expiry - 300, 256));
  EXPECT_EQ(taken, 44u);  // j343 ... j300; j299 expires at last_expiry - 299
  EXPECT_FALSE(Stored("t", "j300").has_value());
  EXPECT_TRUE(Stored("t", "j299").has_value());
  ASSERT_OK_AND_ASSIGN(taken, sweeper.SweepOnce(last_expiry, 256));
  EXPECT_EQ(taken, 256u);
  ASSERT_OK_AND_ASSIGN(taken, sweeper.SweepOnce(last_expiry, 256));
  EXPECT_EQ(taken, 44u);
  ASSERT_OK_AND_ASSIGN(taken, sweeper.SweepOnce(last_expiry, 256));
  EXPECT_EQ(taken, 0u);
  EXPECT_TRUE(ExpiryEntries().empty());
  EXPECT_EQ(sweeper.swept(), 600);
  EXPECT_EQ(Stats("t").canceled(), 0u);
}

TEST_F(RetentionTest, TheJobsGaugeCountsDoneAndCanceled) {
  service().Start();
  Sub sub = Subscribe("t");
  const v1::Delivery d = Deliver(sub, "a");
  ASSERT_EQ(AckCode(d.ack_token()), absl::StatusCode::kOk);
  MustSchedule("t", "b", 1000);
  ASSERT_OK(service().Cancel(CancelReq("t", "b")));
  std::map<std::string, double> by_state;
  for (const prometheus::MetricFamily& family :
       JobsCollector(&service()).Collect()) {
    if (family.name != "delayd_jobs") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : m.label) labels[label.name] = label.value;
      if (labels["topic"] == "t") by_state[labels["state"]] = m.gauge.value;
    }
  }
  EXPECT_EQ(by_state["done"], 1);
  EXPECT_EQ(by_state["canceled"], 1);
  EXPECT_EQ(by_state["scheduled"], 0);
  EXPECT_EQ(by_state["dead"], 0);
}

// Without --retention (DelivererTest's default) nothing is kept.
TEST_F(DelivererTest, WithoutRetentionAckedAndCanceledJobsAreDeletedAtOnce) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  ASSERT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
  EXPECT_FALSE(Stored("t", "a").has_value());
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  MustSchedule("t", "b", 1000);
  ASSERT_OK(service().Cancel(CancelReq("t", "b")));
  EXPECT_FALSE(Stored("t", "b").has_value());
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse again,
                       service().Schedule(ScheduleReq("t", "a", 1000)));
  EXPECT_TRUE(again.created());
  int entries = 0;
  EXPECT_OK(memory_.ScanExpiry(0, INT64_MAX, [&](int64_t, auto, auto) {
    ++entries;
    return true;
  }));
  EXPECT_EQ(entries, 0);
  EXPECT_EQ(Stats("t").done(), 0u);
  EXPECT_EQ(Stats("t").canceled(), 0u);
}

}  // namespace
}  // namespace delayd::server::testing
