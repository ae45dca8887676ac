// InvalidTimeFields (tests/support/valid_time.h) finds out-of-range
// Timestamps and Durations wherever they sit in a message, and only those.
#include "tests/support/valid_time.h"

#include "delayd/v1/delayd.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(InvalidTimeFieldsTest, ValidAndBoundaryValuesPass) {
  v1::ListJobsResponse reply;
  v1::Job* job = reply.add_jobs();
  job->mutable_fire_at()->set_seconds(253402300799);  // 9999-12-31T23:59:59
  job->mutable_fire_at()->set_nanos(999'999'999);
  job->mutable_created_at()->set_seconds(-62135596800);  // 0001-01-01
  job->mutable_retry()->mutable_max_backoff()->set_seconds(-315576000000);
  job->mutable_retry()->mutable_max_backoff()->set_nanos(-999'999'999);
  EXPECT_THAT(InvalidTimeFields(reply), IsEmpty());
}

TEST(InvalidTimeFieldsTest, NamesEachBadFieldByPath) {
  v1::ListJobsResponse reply;
  reply.add_jobs();
  v1::Job* job = reply.add_jobs();
  job->mutable_fire_at()->set_seconds(253402300800);
  job->mutable_updated_at()->set_nanos(-1);
  job->mutable_retry()->mutable_initial_backoff()->set_seconds(1);
  job->mutable_retry()->mutable_initial_backoff()->set_nanos(-1);
  EXPECT_THAT(
      InvalidTimeFields(reply),
      ElementsAre("jobs[1].fire_at = {seconds: 253402300800, nanos: 0}",
                  "jobs[1].retry.initial_backoff = {seconds: 1, nanos: -1}",
                  "jobs[1].updated_at = {seconds: 0, nanos: -1}"));
}

}  // namespace
}  // namespace delayd::testing
