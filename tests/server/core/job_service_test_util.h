// The fixture shared by the JobService tests: a JobService over an
// InMemoryJobStore (behind a FaultInjectingJobStore that is transparent until
// armed) and a FakeClock, with helpers to build requests, plant records,
// snapshot everything the service changes, and wait for the fire path (which
// runs on threads) with a short real-time deadline — never for a timer.
#ifndef DELAYD_TESTS_SERVER_JOB_SERVICE_TEST_UTIL_H_
#define DELAYD_TESTS_SERVER_JOB_SERVICE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/job_service.h"
#include "server/jobs/job_key.h"
#include "server/jobs/limits.h"
#include "server/timer/fake_clock.h"
#include "storage/fault_injecting_job_store.h"
#include "storage/in_memory_job_store.h"
#include "storage/job_record.h"
#include "tests/support/poll.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::testing {

using ::delayd::testing::PollUntil;

// On a second boundary, so that a due time within the first second after it
// sits in the wheel's fine level (whose next due time is exact).
inline constexpr int64_t kStartMs = 1'700'000'000'000;
inline constexpr absl::Duration kWait = absl::Seconds(10);

inline google::protobuf::Duration DurationMs(int64_t ms) {
  return ToProto(absl::Milliseconds(ms));
}

inline google::protobuf::Timestamp TimestampMs(int64_t ms) {
  return storage::UnixMsToTimestamp(ms);
}

inline int64_t Ms(const google::protobuf::Timestamp& ts) {
  return storage::TimestampToUnixMs(ts);
}

inline v1::JobKey Key(std::string_view topic, std::string_view id) {
  v1::JobKey key;
  key.set_topic(std::string(topic));
  key.set_id(std::string(id));
  return key;
}

// A request for (topic, id) due `delay_ms` from now.
inline v1::ScheduleRequest ScheduleReq(
    std::string_view topic, std::string_view id, int64_t delay_ms,
    std::string_view payload = "",
    v1::IfExists if_exists = v1::IF_EXISTS_UNSPECIFIED) {
  v1::ScheduleRequest req;
  req.mutable_job()->set_topic(std::string(topic));
  req.mutable_job()->set_id(std::string(id));
  req.mutable_job()->set_payload(std::string(payload));
  *req.mutable_job()->mutable_delay() = DurationMs(delay_ms);
  req.set_if_exists(if_exists);
  return req;
}

inline v1::RescheduleRequest RescheduleAtReq(std::string_view topic,
                                             std::string_view id,
                                             int64_t fire_at_ms) {
  v1::RescheduleRequest req;
  *req.mutable_key() = Key(topic, id);
  *req.mutable_fire_at() = TimestampMs(fire_at_ms);
  return req;
}

inline v1::CancelRequest CancelReq(std::string_view topic,
                                   std::string_view id) {
  v1::CancelRequest req;
  *req.mutable_key() = Key(topic, id);
  return req;
}

inline v1::GetJobRequest GetReq(std::string_view topic, std::string_view id) {
  v1::GetJobRequest req;
  *req.mutable_key() = Key(topic, id);
  return req;
}

// Expects INVALID_ARGUMENT whose message starts with "<field>:".
inline void ExpectInvalid(const absl::Status& status, std::string_view field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              ::testing::StartsWith(absl::StrCat(AsAbsl(field), ":")))
      << status;
}

// Runs an Async call of the JobService (`start(done)`, e.g. ScheduleAsync)
// and waits for its answer; nullopt when it declined, and then it must not
// have answered.
template <typename Response, typename Start>
std::optional<absl::StatusOr<Response>> RunAsync(Start start) {
  auto answered = std::make_shared<absl::Notification>();
  auto result = std::make_shared<absl::StatusOr<Response>>();
  absl::AnyInvocable<void(absl::StatusOr<Response>)&&> done =
      [answered, result](absl::StatusOr<Response> r) {
        *result = std::move(r);
        answered->Notify();
      };
  if (!start(done)) {
    EXPECT_FALSE(answered->HasBeenNotified());
    return std::nullopt;
  }
  EXPECT_TRUE(answered->WaitForNotificationWithTimeout(kWait));
  return *result;
}

// Sets `clock` to `now_ms`, waits until the timer thread sleeps until
// `next_due_ms` (it has then fired everything due by `now_ms` and nothing
// later), then until the fire thread has readied what was fired.
// REQUIRES: the earliest pending timer is due at next_due_ms, in the same
// second as now_ms (or next_due_ms is Clock::kNoDeadline); `service` runs
// on `clock`.
inline void SettleServiceAt(timer::FakeClock& clock, JobService& service,
                            int64_t now_ms, int64_t next_due_ms) {
  clock.SetMs(now_ms);
  ASSERT_TRUE(clock.AwaitWaiter(next_due_ms, kWait))
      << "timer thread never slept until " << next_due_ms;
  ASSERT_TRUE(PollUntil([&] { return service.FireSettledForTesting(); }, kWait,
                        absl::Milliseconds(1)))
      << "fire thread never settled at " << now_ms;
}

class JobServiceTest : public ::testing::Test {
 protected:
  JobServiceTest() : store_(memory_), clock_(kStartMs) { Restart(); }

  // A fresh service over the same store (as after a process restart), not
  // yet recovered nor started, with limits_ and retention_.
  void Restart() {
    service_.reset();
    service_ = std::make_unique<JobService>(&store_, &clock_, limits_, nullptr,
                                            retention_);
  }

  JobService& service() { return *service_; }

  // Schedules (topic, id) due `delay_ms` from now; fails the test on error.
  v1::Job MustSchedule(std::string_view topic, std::string_view id,
                       int64_t delay_ms, std::string_view payload = "") {
    absl::StatusOr<v1::ScheduleResponse> r =
        service_->Schedule(ScheduleReq(topic, id, delay_ms, payload));
    EXPECT_OK(r);
    return r.ok() ? r->job() : v1::Job();
  }

  std::optional<storage::JobRecord> Stored(std::string_view topic,
                                           std::string_view id) {
    absl::StatusOr<std::optional<storage::JobRecord>> r =
        memory_.Get(topic, id);
    EXPECT_OK(r);
    return r.ok() ? *r : std::nullopt;
  }

  // The attempt mark on the due entry of (topic, id); 0 when none (or no
  // entry).
  uint32_t MarkOf(std::string_view topic, std::string_view id) {
    uint32_t out = 0;
    EXPECT_OK(memory_.ScanDueMarked(
        0, INT64_MAX,
        [&](int64_t, std::string_view t, std::string_view i,
            const storage::DueValue& value) {
          if (t == topic && i == id) out = value.mark;
          return true;
        }));
    return out;
  }

  // Writes a record for (topic, id) in `state`, due at fire_at_ms, straight
  // into the store (for states only delivery reaches: IN_FLIGHT, DONE, DEAD).
  void PutRecord(std::string_view topic, std::string_view id,
                 v1::JobState state, int64_t fire_at_ms) {
    const std::optional<storage::JobRecord> old = Stored(topic, id);
    storage::JobRecord record;
    v1::Job& job = *record.mutable_job();
    job.set_topic(std::string(topic));
    job.set_id(std::string(id));
    job.set_state(state);
    job.set_payload("planted");
    *job.mutable_fire_at() = TimestampMs(fire_at_ms);
    *job.mutable_created_at() = TimestampMs(clock_.NowMs());
    *job.mutable_updated_at() = TimestampMs(clock_.NowMs());
    job.set_attempts(state == v1::JOB_STATE_SCHEDULED ? 0 : 1);
    const storage::Mutation m = storage::Mutation::Put(
        std::move(record), old ? storage::DueIndexEntryOf(*old) : std::nullopt);
    ASSERT_OK(memory_.Apply({&m, 1}, storage::Durability::kSync));
  }

  TopicTable::Counts Counts(std::string_view topic) {
    return service_->topics().CountsOf(AsAbsl(topic));
  }

  // Everything a refused or failed call must leave alone: every record, the
  // due index, the timers and the per-topic counts, as text.
  std::string State() {
    std::string out;
    EXPECT_OK(memory_.ScanTopics([&](std::string_view topic) {
      EXPECT_OK(memory_.ScanJobs(topic, "", "", [&](const auto& record) {
        absl::StrAppend(&out, "record ", record.ShortDebugString(), "\n");
        return true;
      }));
      return true;
    }));
    EXPECT_OK(memory_.ScanDue(
        0, INT64_MAX,
        [&](int64_t due, std::string_view topic, std::string_view id) {
          absl::StrAppend(&out, "due ", due, " ", AsAbsl(topic), " ",
                          AsAbsl(id), "\n");
          return true;
        }));
    absl::StrAppend(&out, "timers ", service_->timers_pending(), "\n");
    for (const std::string& topic : service_->topics().Topics()) {
      const TopicTable::Counts c = Counts(topic);
      absl::StrAppend(&out, "counts ", topic, " live=", c.live,
                      " ready=", c.ready, " in_flight=", c.in_flight,
                      " dead=", c.dead, "\n");
    }
    return out;
  }

  // Polls (real time, short deadline) until `topic` has `n` ready jobs.
  bool WaitForReady(std::string_view topic, int64_t n) {
    return PollUntil([&] { return Counts(topic).ready == n; }, kWait,
                     absl::Milliseconds(1));
  }

  // SettleServiceAt on this fixture's clock and service.
  void SettleAt(int64_t now_ms, int64_t next_due_ms) {
    SettleServiceAt(clock_, *service_, now_ms, next_due_ms);
  }

  Limits limits_;
  absl::Duration retention_ = absl::ZeroDuration();
  storage::InMemoryJobStore memory_;
  storage::FaultInjectingJobStore store_;
  timer::FakeClock clock_;
  std::unique_ptr<JobService> service_;
};

}  // namespace delayd::server::testing

#endif  // DELAYD_TESTS_SERVER_JOB_SERVICE_TEST_UTIL_H_
