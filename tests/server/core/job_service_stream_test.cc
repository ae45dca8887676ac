// JobService::Stream, the requests of a ScheduleStream: each answered as
// its unary rpc would have answered it alone, after the ones before it;
// runs of Schedules of distinct jobs written in one synced batch.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

v1::StreamRequest StreamSchedule(v1::ScheduleRequest req) {
  v1::StreamRequest r;
  *r.mutable_schedule() = std::move(req);
  return r;
}

class JobServiceStreamTest : public JobServiceTest {
 protected:
  std::vector<v1::StreamAnswer> Stream(
      const std::vector<v1::StreamRequest>& requests) {
    std::vector<const v1::StreamRequest*> pointers;
    for (const v1::StreamRequest& r : requests) pointers.push_back(&r);
    return service().Stream(pointers);
  }
};

// One duplicate id, one invalid job, a Reschedule and a Cancel mixed into
// one stream: each request gets its own answer, the one its unary rpc
// gives, and the Schedules of distinct jobs before a repeat share a write.
TEST_F(JobServiceStreamTest, EachRequestGetsWhatItsUnaryRpcWouldAnswer) {
  v1::ScheduleRequest invalid = ScheduleReq("no spaces", "x", 1000);
  std::vector<v1::StreamRequest> requests = {
      StreamSchedule(ScheduleReq("t", "a", 1000, "one")),
      StreamSchedule(ScheduleReq("t", "b", 1000)),
      // The same spec again: an identical retry, OK and not created.
      StreamSchedule(ScheduleReq("t", "a", 1000, "one")),
      // Another spec under a's id: ALREADY_EXISTS.
      StreamSchedule(ScheduleReq("t", "a", 1000, "two")),
      StreamSchedule(invalid),
      {},
      {},
      {},
      StreamSchedule(ScheduleReq("t", "c", 1000)),
  };
  *requests[5].mutable_reschedule() = RescheduleAtReq("t", "b", kStartMs + 5);
  *requests[6].mutable_cancel() = CancelReq("t", "a");
  // requests[7] holds nothing.
  const std::vector<v1::StreamAnswer> answers = Stream(requests);
  ASSERT_EQ(answers.size(), requests.size());
  for (size_t i : {0, 1, 8}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(answers[i].code(), 0) << answers[i].message();
    EXPECT_TRUE(answers[i].schedule().created());
  }
  EXPECT_EQ(answers[0].schedule().job().payload(), "one");
  EXPECT_EQ(answers[2].code(), 0);
  EXPECT_FALSE(answers[2].schedule().created());
  EXPECT_EQ(answers[3].code(),
            static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(answers[3].message(),
              ::testing::HasSubstr("exists with a different spec"));
  EXPECT_FALSE(answers[3].has_schedule());
  // The invalid job's answer is the unary rpc's, field names and all.
  const absl::StatusOr<v1::ScheduleResponse> unary =
      service().Schedule(invalid);
  EXPECT_EQ(answers[4].code(), static_cast<int>(unary.status().code()));
  EXPECT_EQ(answers[4].message(), unary.status().message());
  EXPECT_THAT(answers[4].message(), ::testing::StartsWith("job.topic: "));
  EXPECT_EQ(answers[5].code(), 0);
  EXPECT_EQ(Ms(answers[5].reschedule().job().fire_at()), kStartMs + 5);
  EXPECT_EQ(answers[6].code(), 0);
  EXPECT_EQ(answers[6].cancel().outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(answers[7].code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(answers[7].message(),
            "request: must hold schedule, reschedule or cancel");
  // a canceled (by the request after its repeat), b moved, c created.
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_EQ(Ms(Stored("t", "b")->job().fire_at()), kStartMs + 5);
  EXPECT_TRUE(Stored("t", "c").has_value());
  EXPECT_FALSE(Stored("no spaces", "x").has_value());
  // Synced writes: a and b together, the Reschedule, the Cancel, c. Called
  // one by one, a and b would have been two.
  EXPECT_EQ(memory_.stats().synced_writes, 4u);
}

TEST_F(JobServiceStreamTest, ARunOfDistinctJobsIsOneSyncedWrite) {
  std::vector<v1::StreamRequest> requests;
  for (int i = 0; i < 100; ++i) {
    requests.push_back(StreamSchedule(ScheduleReq("t", absl::StrCat(i), 1000)));
  }
  requests.push_back(StreamSchedule(ScheduleReq("t", "", 1000)));  // named here
  requests.push_back(StreamSchedule(ScheduleReq("t", "", 1000)));
  const std::vector<v1::StreamAnswer> answers = Stream(requests);
  for (const v1::StreamAnswer& a : answers) {
    EXPECT_EQ(a.code(), 0) << a.message();
    EXPECT_TRUE(a.schedule().created());
  }
  EXPECT_NE(answers[100].schedule().job().id(),
            answers[101].schedule().job().id());
  EXPECT_EQ(memory_.stats().synced_writes, 1u);
  EXPECT_EQ(Counts("t").live, 102);
}

// An occurrence's id ('@') is written alone: a Schedule before it in the
// stream may replace its recurring job and withdraw it.
TEST_F(JobServiceStreamTest, AnIdWithAnAtIsWrittenAlone) {
  const std::vector<v1::StreamAnswer> answers =
      Stream({StreamSchedule(ScheduleReq("t", "x", 1000)),
              StreamSchedule(ScheduleReq("t", "x@1", 1000)),
              StreamSchedule(ScheduleReq("t", "y", 1000)),
              StreamSchedule(ScheduleReq("t", "z", 1000))});
  for (const v1::StreamAnswer& a : answers) {
    EXPECT_EQ(a.code(), 0) << a.message();
  }
  EXPECT_EQ(memory_.stats().synced_writes, 3u);  // x; x@1; y and z
}

// A failed store write fails its whole run, each request answered with the
// store's error, and writes nothing; the requests after it still run.
TEST_F(JobServiceStreamTest, AFailedWriteAnswersEachRequestOfItsRun) {
  store_.FailNextWrites(1, absl::UnavailableError("disk on fire"));
  std::vector<v1::StreamRequest> requests = {
      StreamSchedule(ScheduleReq("t", "a", 1000)),
      StreamSchedule(ScheduleReq("t", "b", 1000)),
      {},
  };
  *requests[2].mutable_cancel() = CancelReq("t", "a");
  const std::vector<v1::StreamAnswer> answers = Stream(requests);
  for (size_t i : {0, 1}) {
    EXPECT_EQ(answers[i].code(),
              static_cast<int>(absl::StatusCode::kUnavailable));
    EXPECT_THAT(answers[i].message(), ::testing::HasSubstr("disk on fire"));
  }
  EXPECT_EQ(answers[2].code(), 0);
  EXPECT_EQ(answers[2].cancel().outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_FALSE(Stored("t", "b").has_value());
}

}  // namespace
}  // namespace delayd::server::testing
