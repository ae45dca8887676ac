#include "storage/job_record.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/mutation.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::MakeRecord;
using ::testing::HasSubstr;

TEST(JobRecordTest, MillisecondConversions) {
  google::protobuf::Timestamp ts;
  ts.set_seconds(1'780'000'000);
  ts.set_nanos(123'999'999);  // Sub-millisecond part truncated.
  EXPECT_EQ(TimestampToUnixMs(ts), 1'780'000'000'123);
  for (int64_t ms : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{-1001},
                     int64_t{4'935'000'000'999}}) {
    EXPECT_EQ(TimestampToUnixMs(UnixMsToTimestamp(ms)), ms) << ms;
  }
  EXPECT_EQ(UnixMsToTimestamp(-1).seconds(), -1);
  EXPECT_EQ(UnixMsToTimestamp(-1).nanos(), 999'000'000);
  ts.set_seconds(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(TimestampToUnixMs(ts), std::numeric_limits<int64_t>::max());
}

// A record read from disk is not checked: a timestamp at the edge of the
// range with out-of-range nanos saturates instead of overflowing (found by
// job_record_fuzz: 9223372036854775 s + 999999999 ns overflowed int64).
TEST(JobRecordTest, MillisecondsOfACorruptTimestampSaturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  google::protobuf::Timestamp ts;
  ts.set_seconds(kMax / 1000);
  ts.set_nanos(999'999'999);
  EXPECT_EQ(TimestampToUnixMs(ts), kMax);
  ts.set_seconds(kMin / 1000 + 1);
  ts.set_nanos(std::numeric_limits<int32_t>::min());
  EXPECT_EQ(TimestampToUnixMs(ts), kMin);
  // In range, negative nanos still count.
  ts.set_seconds(10);
  ts.set_nanos(-5'000'000);
  EXPECT_EQ(TimestampToUnixMs(ts), 9'995);
}

TEST(JobRecordTest, OnlyLiveJobsHaveADueEntry) {
  using v1::JobState;
  for (JobState s : {v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_READY,
                     v1::JOB_STATE_IN_FLIGHT}) {
    EXPECT_EQ(DueIndexEntryOf(MakeRecord("t", "i", 77, s)), 77) << s;
  }
  for (JobState s : {v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_DEAD,
                     v1::JOB_STATE_DONE, v1::JOB_STATE_CANCELED}) {
    EXPECT_EQ(DueIndexEntryOf(MakeRecord("t", "i", 77, s)), std::nullopt) << s;
  }
  EXPECT_EQ(DueIndexEntryOf(MakeRecord("t", "i", -5000)), 0);
}

TEST(JobRecordTest, ParseRefusesWhatIsNotACurrentRecordOfItsKey) {
  JobRecord record = MakeRecord("t", "id", 1);
  record.set_format_version(kJobRecordFormatVersion);
  ASSERT_OK(ParseJobRecord({"t", "id"}, record.SerializeAsString()));

  absl::Status s = ParseJobRecord({"t", "id"}, "\xff\xff\xff").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("\"t\\000id\""));

  JobRecord unversioned = record;
  unversioned.clear_format_version();
  s = ParseJobRecord({"t", "id"}, unversioned.SerializeAsString()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("format_version missing"));

  s = ParseJobRecord({"t", "other"}, record.SerializeAsString()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("names job"));

  JobRecord newer = record;
  newer.set_format_version(kJobRecordFormatVersion + 6);
  s = ParseJobRecord({"t", "id"}, newer.SerializeAsString()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("format_version 7"));
  EXPECT_THAT(s.message(), HasSubstr("\"t\\000id\""));
}

TEST(MutationTest, PutStampsTheFormatAndDerivesTheDueEntry) {
  const Mutation put = Mutation::Put(MakeRecord("t", "i", 9), -3);
  EXPECT_EQ(put.record().format_version(), kJobRecordFormatVersion);
  EXPECT_EQ(put.new_due_ms(), 9);
  EXPECT_EQ(put.previous_due_ms(), 0);  // Clamped like the index.
  const Mutation del = Mutation::Delete("t", "i", std::nullopt);
  EXPECT_EQ(del.new_due_ms(), std::nullopt);
  EXPECT_EQ(del.topic(), "t");
  EXPECT_EQ(del.id(), "i");
}

TEST(JobRecordTest, OnlyRetainedFinishedJobsHaveAnExpiryEntry) {
  for (const v1::JobState state :
       {v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_READY, v1::JOB_STATE_IN_FLIGHT,
        v1::JOB_STATE_DEAD, v1::JOB_STATE_DONE, v1::JOB_STATE_CANCELED}) {
    JobRecord record = MakeRecord("t", "i", 7, state);
    EXPECT_EQ(ExpiryIndexEntryOf(record), std::nullopt) << state;
    record.set_expires_at_ms(1234);
    const bool finished =
        state == v1::JOB_STATE_DONE || state == v1::JOB_STATE_CANCELED;
    EXPECT_EQ(IsRetained(record), finished) << state;
    EXPECT_EQ(ExpiryIndexEntryOf(record),
              finished ? std::optional<int64_t>(1234) : std::nullopt)
        << state;
  }
}

TEST(MutationTest, CheckPreviousExpiry) {
  JobRecord done = MakeRecord("t", "i", 7, v1::JOB_STATE_DONE);
  done.set_expires_at_ms(50);
  const Mutation sweep = Mutation::Delete("t", "i", std::nullopt, 50);
  EXPECT_OK(CheckPreviousDue(sweep, done));
  const Mutation forgot = Mutation::Delete("t", "i", std::nullopt);
  const absl::Status s = CheckPreviousDue(forgot, done);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("previous_expiry_ms none"));
  EXPECT_THAT(s.message(), HasSubstr("expiry entry is 50"));
  EXPECT_EQ(CheckPreviousDue(sweep, std::nullopt).code(),
            absl::StatusCode::kFailedPrecondition);
  const Mutation put = Mutation::Put(done, std::nullopt);
  EXPECT_EQ(put.new_expiry_ms(), 50);
  EXPECT_EQ(put.new_due_ms(), std::nullopt);
}

TEST(MutationTest, CheckPreviousDue) {
  const Mutation m = Mutation::Put(MakeRecord("t", "i", 9), 5);
  EXPECT_OK(CheckPreviousDue(m, MakeRecord("t", "i", 5)));
  EXPECT_EQ(CheckPreviousDue(m, MakeRecord("t", "i", 6)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckPreviousDue(m, std::nullopt).code(),
            absl::StatusCode::kFailedPrecondition);
  const Mutation fresh = Mutation::Put(MakeRecord("t", "i", 9), std::nullopt);
  EXPECT_OK(CheckPreviousDue(fresh, std::nullopt));
  EXPECT_OK(
      CheckPreviousDue(fresh, MakeRecord("t", "i", 5, v1::JOB_STATE_DEAD)));
}

}  // namespace
}  // namespace delayd::storage
