// JobLedger: what a committed write of a job record does to the in-memory
// bookkeeping, from the record's state before and after it.
#include "server/jobs/job_ledger.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_key.h"
#include "server/timer/fake_clock.h"
#include "tests/support/poll.h"

namespace delayd::server {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr char kTopic[] = "orders";
constexpr char kId[] = "o-1";

using ::delayd::testing::PollUntil;
using Cause = JobLedger::Cause;
using ::testing::ElementsAre;

class JobLedgerTest : public ::testing::Test {
 protected:
  JobLedgerTest()
      : scheduler_(&clock_, [](std::vector<timer::TimerEntry>) {}),
        timers_(&scheduler_),
        terminal_(&topics_),
        ledger_(&topics_, &terminal_, &timers_, &due_, &metrics_) {
    scheduler_.Start();
  }
  ~JobLedgerTest() override { scheduler_.Stop(); }

  // Waits until the scheduler has fired every timer due by the clock's now,
  // as before the fire path calls Due.
  void FireDue() {
    const int64_t now = clock_.NowMs();
    ASSERT_TRUE(PollUntil([&] { return scheduler_.SleepsPastForTesting(now); },
                          absl::Seconds(10), absl::Milliseconds(1)));
  }

  // One change of the job kId of kTopic.
  bool Apply(v1::JobState before, v1::JobState after,
             std::optional<int64_t> due_ms = std::nullopt,
             Cause cause = Cause::kOther, bool ready_now = false) {
    JobLedger::Change c;
    c.topic = kTopic;
    c.id = kId;
    c.before = before;
    c.after = after;
    c.due_ms = due_ms;
    c.cause = cause;
    c.ready_now = ready_now;
    return ledger_.Apply(c);
  }
  // Job `id` of kTopic created SCHEDULED, due at kT0.
  void Create(absl::string_view id) {
    JobLedger::Change c;
    c.topic = kTopic;
    c.id = id;
    c.after = v1::JOB_STATE_SCHEDULED;
    c.due_ms = kT0;
    ledger_.Apply(c);
  }
  TopicTable::Counts Counts() { return topics_.CountsOf(kTopic); }
  double Count(prometheus::Counter* DeliveryMetrics::Topic::*counter) {
    return (metrics_.For(kTopic).*counter)->Value();
  }

  timer::FakeClock clock_{kT0};
  timer::Scheduler scheduler_;
  TopicTable topics_;
  JobTimers timers_;
  TerminalStateCounter terminal_;
  DueBook due_;
  DeliveryMetrics metrics_;
  JobLedger ledger_;
};

TEST_F(JobLedgerTest, TheDueBookFollowsTheEntryEachWriteRemovesAndAdds) {
  const auto moved = [&](std::optional<int64_t> from,
                         std::optional<int64_t> to) {
    JobLedger::Change c;
    c.topic = kTopic;
    c.id = kId;
    c.before = v1::JOB_STATE_SCHEDULED;
    c.after = v1::JOB_STATE_SCHEDULED;
    c.previous_due_ms = from;
    c.due_ms = to;
    ledger_.Apply(c);
  };
  const int64_t s0 = DueBook::SecondOf(kT0);
  moved(std::nullopt, kT0 + 1500);  // created
  EXPECT_EQ(due_.Histogram(kTopic, s0, 1, 3), (std::vector<uint64_t>{0, 1, 0}));
  moved(kT0 + 1500, kT0 + 2000);  // moved
  EXPECT_EQ(due_.Histogram(kTopic, s0, 1, 3), (std::vector<uint64_t>{0, 0, 1}));
  moved(kT0 + 2000, kT0 + 2000);  // an attempt mark: unchanged
  EXPECT_EQ(due_.total(), 1);
  moved(kT0 + 2000, std::nullopt);  // deleted
  EXPECT_EQ(due_.total(), 0);
  EXPECT_EQ(due_.Histogram("", s0, 1, 3), (std::vector<uint64_t>{0, 0, 0}));
}

TEST_F(JobLedgerTest, AScheduledJobIsLiveWithATimer) {
  EXPECT_FALSE(Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED,
                     kT0 + 1000, Cause::kScheduled));
  EXPECT_EQ(Counts().live, 1);
  EXPECT_EQ(Counts().scheduled(), 1);
  EXPECT_EQ(timers_.tracked(), 1u);
  EXPECT_EQ(scheduler_.size(), 1u);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::scheduled), 1);
  // Moved: still one timer, still one live job.
  Apply(v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_SCHEDULED, kT0 + 5000);
  EXPECT_EQ(Counts().live, 1);
  EXPECT_EQ(scheduler_.size(), 1u);
}

TEST_F(JobLedgerTest, ADueJobThatIsCanceledLeavesTheReadyQueue) {
  Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED, kT0);
  FireDue();
  EXPECT_TRUE(ledger_.Due(kTopic, kId));
  EXPECT_FALSE(ledger_.Due(kTopic, kId));  // its timer is gone now
  EXPECT_EQ(timers_.tracked(), 0u);        // its timer fired
  EXPECT_EQ(Counts().ready, 1);
  Apply(v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_CANCELED, std::nullopt,
        Cause::kCanceled);
  EXPECT_EQ(Counts().ready, 0);
  EXPECT_EQ(Counts().live, 0);
  EXPECT_EQ(Counts().canceled, 1);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::canceled), 1);
}

// A chunk of a herd: each job's timer is forgotten and each is queued once,
// in order; one queued already is not counted.
TEST_F(JobLedgerTest, DueBatchQueuesEachJobOnceInOrder) {
  const std::vector<std::string> ids = {"b", "a", "c"};
  for (const std::string& id : ids) Create(id);
  ASSERT_EQ(timers_.tracked(), 3u);
  FireDue();
  EXPECT_TRUE(ledger_.Due(kTopic, "a"));
  EXPECT_EQ(timers_.tracked(), 2u);
  const std::vector<absl::string_view> views(ids.begin(), ids.end());
  EXPECT_EQ(ledger_.DueBatch(kTopic, views), 2);
  EXPECT_EQ(timers_.tracked(), 0u);
  EXPECT_EQ(Counts().ready, 3);
  EXPECT_THAT(topics_.PopReady(kTopic, 10), ElementsAre("a", "b", "c"));
}

TEST_F(JobLedgerTest, TakingAJobForDeliveryChangesNothingHere) {
  Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED, kT0);
  FireDue();
  ASSERT_TRUE(ledger_.Due(kTopic, kId));
  ASSERT_EQ(topics_.PopReady(kTopic, 1).size(), 1u);  // as Dispatch does
  const TopicTable::Counts before = Counts();
  EXPECT_FALSE(Apply(v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_IN_FLIGHT, kT0));
  EXPECT_EQ(Counts().live, before.live);
  EXPECT_EQ(Counts().ready, before.ready);
  EXPECT_EQ(timers_.tracked(), 0u);  // no timer while in flight
  EXPECT_EQ(scheduler_.size(), 0u);
}

// A timer fired, and its job's entry is still where it fired (a crowd's
// millisecond keeps the entries removed from it), but the job was changed
// before the fire path read it: canceled, or moved (its timer armed again),
// it is not due by that timer. The moved one is, once its new timer fires.
TEST_F(JobLedgerTest, AJobChangedAfterItsTimerFiredIsNotDueByIt) {
  for (const char* id : {"canceled", "moved", "kept"}) Create(id);
  FireDue();
  const auto change = [&](const char* id, v1::JobState after,
                          std::optional<int64_t> due_ms) {
    JobLedger::Change c;
    c.topic = kTopic;
    c.id = id;
    c.before = v1::JOB_STATE_SCHEDULED;
    c.after = after;
    c.previous_due_ms = kT0;
    c.due_ms = due_ms;
    ledger_.Apply(c);
  };
  change("canceled", v1::JOB_STATE_CANCELED, std::nullopt);
  change("moved", v1::JOB_STATE_SCHEDULED, kT0 + 5000);
  const std::vector<absl::string_view> ids = {"canceled", "kept", "moved"};
  EXPECT_EQ(ledger_.DueBatch(kTopic, ids), 1);
  EXPECT_THAT(topics_.PopReady(kTopic, 10), ElementsAre("kept"));
  EXPECT_EQ(timers_.tracked(), 1u);  // "moved"'s new timer, pending
  EXPECT_EQ(scheduler_.size(), 1u);
  clock_.SetMs(kT0 + 5000);
  FireDue();
  EXPECT_TRUE(ledger_.Due(kTopic, "moved"));
  EXPECT_EQ(timers_.tracked(), 0u);
}

TEST_F(JobLedgerTest, ARetryDueNowIsQueuedAtOnceALaterOneGetsATimer) {
  Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED, kT0);
  FireDue();
  ASSERT_TRUE(ledger_.Due(kTopic, kId));
  topics_.PopReady(kTopic, 1);
  EXPECT_TRUE(Apply(v1::JOB_STATE_IN_FLIGHT, v1::JOB_STATE_SCHEDULED, kT0,
                    Cause::kOther, /*ready_now=*/true));
  EXPECT_EQ(Counts().ready, 1);
  EXPECT_EQ(timers_.tracked(), 0u);  // queued, no timer
  EXPECT_EQ(scheduler_.size(), 0u);
  topics_.PopReady(kTopic, 1);
  EXPECT_FALSE(Apply(v1::JOB_STATE_IN_FLIGHT, v1::JOB_STATE_SCHEDULED,
                     kT0 + 2000, Cause::kNacked));
  EXPECT_EQ(timers_.tracked(), 1u);
  EXPECT_EQ(scheduler_.size(), 1u);
  EXPECT_EQ(Counts().live, 1);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::nacked), 1);
}

TEST_F(JobLedgerTest, TheLastAttemptGoesDeadAndRedriveBringsItBack) {
  Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED, kT0);
  Apply(v1::JOB_STATE_IN_FLIGHT, v1::JOB_STATE_DEAD);
  EXPECT_EQ(Counts().live, 0);
  EXPECT_EQ(Counts().dead, 1);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::dead_lettered), 1);
  Apply(v1::JOB_STATE_DEAD, v1::JOB_STATE_SCHEDULED, kT0 + 10);  // redrive
  EXPECT_EQ(Counts().live, 1);
  EXPECT_EQ(Counts().dead, 0);
  EXPECT_EQ(scheduler_.size(), 1u);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::dead_lettered), 1);
}

TEST_F(JobLedgerTest, AnAckFinishesTheJobAndARetainedOneIsSweptLater) {
  Apply(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_SCHEDULED, kT0);
  Apply(v1::JOB_STATE_IN_FLIGHT, v1::JOB_STATE_DONE, std::nullopt,
        Cause::kAcked);
  EXPECT_EQ(Counts().live, 0);
  EXPECT_EQ(Counts().done, 1);
  EXPECT_EQ(Count(&DeliveryMetrics::Topic::acked), 1);
  Apply(v1::JOB_STATE_DONE, v1::JOB_STATE_UNSPECIFIED);  // the sweeper
  EXPECT_EQ(Counts().done, 0);
}

TEST_F(JobLedgerTest, OfReadsTheChangeOffAMutation) {
  storage::JobRecord record;
  record.mutable_job()->set_topic(kTopic);
  record.mutable_job()->set_id(kId);
  record.mutable_job()->set_state(v1::JOB_STATE_SCHEDULED);
  *record.mutable_job()->mutable_fire_at() = storage::UnixMsToTimestamp(kT0);
  record.mutable_job()->set_payload("12345");
  const storage::Mutation put =
      storage::Mutation::Put(record, std::nullopt, std::nullopt);
  JobLedger::Change c =
      JobLedger::Of(put, v1::JOB_STATE_UNSPECIFIED, 0, Cause::kScheduled);
  EXPECT_EQ(c.topic, kTopic);
  EXPECT_EQ(c.id, kId);
  EXPECT_EQ(c.after, v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(c.due_ms, kT0);
  EXPECT_EQ(c.cause, Cause::kScheduled);
  EXPECT_EQ(c.payload_bytes_before, 0);
  EXPECT_EQ(c.payload_bytes_after, 5);
  const storage::Mutation del =
      storage::Mutation::Delete(kTopic, kId, kT0, std::nullopt);
  c = JobLedger::Of(del, v1::JOB_STATE_IN_FLIGHT, 5);
  EXPECT_EQ(c.after, v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(c.due_ms, std::nullopt);
  EXPECT_EQ(c.payload_bytes_before, 5);
  EXPECT_EQ(c.payload_bytes_after, 0);
}

// The payload bytes of a topic's live jobs follow every change of a live
// job, from the sizes before and after it, and count nothing that is not
// live.
TEST_F(JobLedgerTest, LivePayloadBytesFollowTheLiveJobs) {
  const auto apply = [&](v1::JobState before, int64_t bytes_before,
                         v1::JobState after, int64_t bytes_after) {
    JobLedger::Change c;
    c.topic = kTopic;
    c.id = kId;
    c.before = before;
    c.after = after;
    c.payload_bytes_before = bytes_before;
    c.payload_bytes_after = bytes_after;
    ledger_.Apply(c);
    return Counts().live_payload_bytes;
  };
  using v1::JOB_STATE_CANCELED;
  using v1::JOB_STATE_DEAD;
  using v1::JOB_STATE_IN_FLIGHT;
  using v1::JOB_STATE_SCHEDULED;
  using v1::JOB_STATE_UNSPECIFIED;
  EXPECT_EQ(apply(JOB_STATE_UNSPECIFIED, 0, JOB_STATE_SCHEDULED, 100), 100);
  // Replaced with another payload.
  EXPECT_EQ(apply(JOB_STATE_SCHEDULED, 100, JOB_STATE_SCHEDULED, 40), 40);
  EXPECT_EQ(apply(JOB_STATE_SCHEDULED, 40, JOB_STATE_IN_FLIGHT, 40), 40);
  // Canceled in flight: no longer live.
  EXPECT_EQ(apply(JOB_STATE_IN_FLIGHT, 40, JOB_STATE_CANCELED, 40), 0);
  EXPECT_EQ(apply(JOB_STATE_CANCELED, 40, JOB_STATE_UNSPECIFIED, 0), 0);
  EXPECT_EQ(apply(JOB_STATE_UNSPECIFIED, 0, JOB_STATE_SCHEDULED, 7), 7);
  EXPECT_EQ(apply(JOB_STATE_SCHEDULED, 7, JOB_STATE_DEAD, 7), 0);
  // Redriven.
  EXPECT_EQ(apply(JOB_STATE_DEAD, 7, JOB_STATE_SCHEDULED, 7), 7);
  EXPECT_EQ(Counts().live, 1);
}

// Every table a ledger keeps, on its own clock and scheduler.
struct Books {
  Books()
      : scheduler(&clock, [](std::vector<timer::TimerEntry>) {}),
        timers(&scheduler),
        terminal(&topics),
        ledger(&topics, &terminal, &timers, &due, &metrics) {
    scheduler.Start();
  }
  ~Books() { scheduler.Stop(); }
  // Moves the clock to `now_ms` and waits until every timer due by then
  // has fired.
  void FireAt(int64_t now_ms) {
    clock.SetMs(now_ms);
    ASSERT_TRUE(
        PollUntil([&] { return scheduler.SleepsPastForTesting(now_ms); },
                  absl::Seconds(10), absl::Milliseconds(1)));
  }
  timer::FakeClock clock{kT0};
  timer::Scheduler scheduler;
  TopicTable topics;
  JobTimers timers;
  TerminalStateCounter terminal;
  DueBook due;
  DeliveryMetrics metrics;
  JobLedger ledger;
};

// What a reader of either ledger can see: each topic's counts, due-book
// histogram and counters, and the timers.
void ExpectSameBooks(Books& a, Books& b, const std::vector<std::string>& topics,
                     int round) {
  SCOPED_TRACE(::testing::Message() << "round " << round);
  const int64_t s0 = DueBook::SecondOf(kT0);
  for (const std::string& topic : topics) {
    const TopicTable::Counts x = a.topics.CountsOf(topic);
    const TopicTable::Counts y = b.topics.CountsOf(topic);
    EXPECT_EQ(x.live, y.live) << topic;
    EXPECT_EQ(x.live_payload_bytes, y.live_payload_bytes) << topic;
    EXPECT_EQ(x.ready, y.ready) << topic;
    EXPECT_EQ(x.in_flight, y.in_flight) << topic;
    EXPECT_EQ(x.dead, y.dead) << topic;
    EXPECT_EQ(x.done, y.done) << topic;
    EXPECT_EQ(x.canceled, y.canceled) << topic;
    EXPECT_EQ(a.due.Histogram(topic, s0 - 1, 1, 64),
              b.due.Histogram(topic, s0 - 1, 1, 64))
        << topic;
    for (auto counter :
         {&DeliveryMetrics::Topic::scheduled, &DeliveryMetrics::Topic::canceled,
          &DeliveryMetrics::Topic::acked, &DeliveryMetrics::Topic::nacked,
          &DeliveryMetrics::Topic::dead_lettered}) {
      EXPECT_EQ((a.metrics.For(topic).*counter)->Value(),
                (b.metrics.For(topic).*counter)->Value())
          << topic;
    }
  }
  EXPECT_EQ(a.due.total(), b.due.total());
  EXPECT_EQ(a.timers.tracked(), b.timers.tracked());
  EXPECT_EQ(a.scheduler.size(), b.scheduler.size());
}

// ApplyBatch leaves the books as Apply of each change does, over random
// lives of jobs of three topics: created, fired, taken, acked, nacked (due
// now or later), dead-lettered, redriven, canceled, retained and swept,
// changed in batches that mix the topics in runs and one by one.
TEST(JobLedgerBatchTest, ApplyBatchLeavesTheBooksAsApplyOfEachChange) {
  using v1::JobState;
  const std::vector<std::string> topics = {"a", "b", "c"};
  struct Job {
    std::string topic, id;
    JobState state = v1::JOB_STATE_UNSPECIFIED;
    std::optional<int64_t> due;  // its due entry, while live
    int64_t payload = 0;
  };
  std::vector<Job> jobs;
  for (const std::string& topic : topics) {
    for (int i = 0; i < 25; ++i) {
      Job job;
      job.topic = topic;
      job.id = "j" + std::to_string(i);
      jobs.push_back(job);
    }
  }
  Books one, batched;
  std::mt19937 rng(7);
  const auto pick = [&](int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(rng);
  };
  for (int round = 0; round < 400; ++round) {
    // Time moves 100 ms a round: the timers due by then fire.
    const int64_t now = kT0 + 100 * round;
    one.FireAt(now);
    batched.FireAt(now);
    std::vector<size_t> chosen(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) chosen[i] = i;
    std::shuffle(chosen.begin(), chosen.end(), rng);
    chosen.resize(1 + pick(30));
    // Half the batches in runs of one topic, as Ack and Dispatch make them.
    if (pick(2) == 0) std::sort(chosen.begin(), chosen.end());
    std::vector<JobLedger::Change> changes;
    for (size_t i : chosen) {
      Job& job = jobs[i];
      JobLedger::Change c;
      c.topic = job.topic;
      c.id = job.id;
      c.before = job.state;
      c.previous_due_ms = job.due;
      c.payload_bytes_before = job.payload;
      const int64_t later = now + 100 * pick(90);
      const int64_t payload = pick(200);
      switch (job.state) {
        case v1::JOB_STATE_UNSPECIFIED:
          c.cause = JobLedger::Cause::kScheduled;
          c.after = v1::JOB_STATE_SCHEDULED;
          c.due_ms = later;
          c.ready_now = pick(4) == 0;
          c.payload_bytes_after = payload;
          break;
        case v1::JOB_STATE_SCHEDULED:
        case v1::JOB_STATE_READY:
          switch (pick(4)) {
            case 0:  // taken for delivery
              c.after = v1::JOB_STATE_IN_FLIGHT;
              c.due_ms = job.due;
              c.payload_bytes_after = job.payload;
              break;
            case 1:  // moved
              c.after = v1::JOB_STATE_SCHEDULED;
              c.due_ms = later;
              c.payload_bytes_after = job.payload;
              break;
            case 2:  // canceled
              c.cause = JobLedger::Cause::kCanceled;
              c.after = pick(2) == 0 ? v1::JOB_STATE_UNSPECIFIED
                                     : v1::JOB_STATE_CANCELED;
              break;
            default:  // replaced, due now
              c.cause = JobLedger::Cause::kScheduled;
              c.after = v1::JOB_STATE_SCHEDULED;
              c.due_ms = now;
              c.ready_now = true;
              c.payload_bytes_after = payload;
          }
          break;
        case v1::JOB_STATE_IN_FLIGHT:
          switch (pick(5)) {
            case 0:
              c.cause = JobLedger::Cause::kAcked;
              c.after = v1::JOB_STATE_UNSPECIFIED;
              break;
            case 1:  // acked and retained
              c.cause = JobLedger::Cause::kAcked;
              c.after = v1::JOB_STATE_DONE;
              c.payload_bytes_after = job.payload;
              break;
            case 2:  // nacked, due now or later
              c.cause = JobLedger::Cause::kNacked;
              c.after = v1::JOB_STATE_SCHEDULED;
              c.ready_now = pick(2) == 0;
              c.due_ms = c.ready_now ? now : later;
              c.payload_bytes_after = job.payload;
              break;
            case 3:
              c.after = v1::JOB_STATE_DEAD;
              c.payload_bytes_after = job.payload;
              break;
            default:  // canceled in flight
              c.cause = JobLedger::Cause::kCanceled;
              c.after = v1::JOB_STATE_CANCELED;
              c.payload_bytes_after = job.payload;
          }
          break;
        case v1::JOB_STATE_DEAD:
          if (pick(2) == 0) {  // redriven
            c.after = v1::JOB_STATE_SCHEDULED;
            c.due_ms = later;
            c.payload_bytes_after = job.payload;
          } else {
            c.after = v1::JOB_STATE_UNSPECIFIED;
          }
          break;
        default:  // DONE, CANCELED: swept
          c.after = v1::JOB_STATE_UNSPECIFIED;
      }
      job.state = c.after;
      job.due = c.due_ms;
      job.payload = c.payload_bytes_after;
      changes.push_back(c);
    }
    int64_t queued_one = 0;
    for (const JobLedger::Change& c : changes) {
      queued_one += one.ledger.Apply(c) ? 1 : 0;
    }
    EXPECT_EQ(batched.ledger.ApplyBatch(changes), queued_one);
    // Those armed at `now` have fired (and those due later have not), in
    // both. Then some scheduled jobs fall due, and some ready ones are
    // taken.
    one.FireAt(now);
    batched.FireAt(now);
    for (const std::string& topic : topics) {
      std::vector<absl::string_view> due;
      for (const Job& job : jobs) {
        if (job.topic == topic && job.state == v1::JOB_STATE_SCHEDULED &&
            pick(3) == 0) {
          due.push_back(job.id);
        }
      }
      EXPECT_EQ(one.ledger.DueBatch(topic, due),
                batched.ledger.DueBatch(topic, due));
      const size_t take = static_cast<size_t>(pick(4));
      EXPECT_EQ(one.topics.PopReady(topic, take),
                batched.topics.PopReady(topic, take));
    }
    ExpectSameBooks(one, batched, topics, round);
    if (HasFailure()) return;
  }
  for (const std::string& topic : topics) {
    EXPECT_EQ(one.topics.PopReady(topic, 1000),
              batched.topics.PopReady(topic, 1000));
  }
}

}  // namespace
}  // namespace delayd::server
