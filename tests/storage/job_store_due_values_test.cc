// The JobStore contract for the values of due entries (key_codec.h), run
// against every implementation: attempt marks, the marks of recurring jobs
// and of occurrences made ahead, and the payload size every entry carries.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/storage/job_store_test_fixture.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::Canonical;
using ::delayd::storage::testing::Dump;
using ::delayd::storage::testing::ExpectDueIndexConsistent;
using ::delayd::storage::testing::Harnesses;
using ::delayd::storage::testing::JobStoreTest;
using ::delayd::storage::testing::MakeRecord;
using ::delayd::v1::JOB_STATE_CANCELED;
using ::delayd::v1::JOB_STATE_DEAD;
using ::delayd::v1::JOB_STATE_DONE;
using ::delayd::v1::JOB_STATE_IN_FLIGHT;
using ::delayd::v1::JOB_STATE_READY;
using ::delayd::v1::JOB_STATE_SCHEDULED;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TYPED_TEST_SUITE(JobStoreTest, Harnesses);

TYPED_TEST(JobStoreTest, AnAttemptMarkSitsOnTheDueEntryUntilTheRecordChanges) {
  const JobRecord a = MakeRecord("t", "a", 10);
  this->Put(a, std::nullopt);
  this->Put(MakeRecord("t", "b", 20), std::nullopt);
  this->Put(MakeRecord("t", "c", 30), std::nullopt);
  this->Put(MakeRecord("t", "d", 40), std::nullopt);
  const testing::StoreDump before = Dump(this->store());
  const std::vector<Mutation> marks = {
      Mutation::MarkAttempt("t", "a", 10, 1, 7),
      Mutation::MarkAttempt("t", "b", 20, 300, 7),
      Mutation::MarkAttempt("t", "c", 30, 4'000'000'000u, 7),
      Mutation::MarkAttempt("t", "d", 40, 7, 7)};
  ASSERT_OK(this->store().Apply(marks, Durability::kNoSync));
  // Records and due times as they were; only the marks are new.
  EXPECT_EQ(Dump(this->store()), before);
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/a", 1u), Pair("t/b", 300u),
                          Pair("t/c", 4'000'000'000u), Pair("t/d", 7u)));
  this->harness_.Reopen();
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/a", 1u), Pair("t/b", 300u),
                          Pair("t/c", 4'000'000'000u), Pair("t/d", 7u)));
  // A put of the record clears its mark, also when the due time stays; a
  // delete takes it with the entry; a mark of 0 clears it; a mark of
  // another job's entry leaves the others alone.
  JobRecord moved = MakeRecord("t", "b", 25);
  const std::vector<Mutation> changes = {
      Mutation::Put(a, 10), Mutation::Put(moved, 20),
      Mutation::Delete("t", "c", 30),
      Mutation::MarkAttempt("t", "d", 40, 0, 7)};
  ASSERT_OK(this->store().Apply(changes, Durability::kNoSync));
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/a", 0u), Pair("t/b", 0u), Pair("t/d", 0u)));
  this->harness_.Reopen();
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/a", 0u), Pair("t/b", 0u), Pair("t/d", 0u)));
  ExpectDueIndexConsistent(Dump(this->store()));
}

TYPED_TEST(JobStoreTest, ARecurringJobsDueEntryIsMarkedByEveryPutOfIt) {
  JobRecord parent = MakeRecord("t", "cron", 10);
  parent.mutable_job()->mutable_recurring()->set_occurrences_fired(3);
  this->Put(parent, std::nullopt);
  this->Put(MakeRecord("t", "once", 10), std::nullopt);
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron", kRecurringMark), Pair("t/once", 0u)));
  // ScanDueFrom, the fire path's read under locks, says so too.
  std::vector<uint32_t> from;
  ASSERT_OK(this->store().ScanDueFrom(
      10, "t", "cron", 11,
      [&](int64_t, std::string_view, std::string_view, const DueValue& value) {
        from.push_back(value.mark);
        return true;
      }));
  EXPECT_THAT(from, ElementsAre(kRecurringMark, 0u));
  // Moved, it stays marked; made one-shot (REPLACE), it loses the mark.
  JobRecord moved = parent;
  moved.mutable_job()->mutable_fire_at()->set_seconds(1);
  this->Put(moved, 10);
  this->harness_.Reopen();
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron", kRecurringMark), Pair("t/once", 0u)));
  this->Put(MakeRecord("t", "cron", 1000), 1010);  // 1 s + 10 ms
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron", 0u), Pair("t/once", 0u)));
  ExpectDueIndexConsistent(Dump(this->store()));
}

// An occurrence made ahead (layout 5) is marked kAheadMark until a
// delivery reaches it: the attempt mark replaces it, and a put after an
// attempt (a retry) carries none.
TYPED_TEST(JobStoreTest, AnOccurrenceMadeAheadIsMarkedUntilADeliveryReachesIt) {
  JobRecord child = MakeRecord("t", "cron@20", 20);
  child.set_made_ahead(true);
  this->Put(child, std::nullopt);
  this->Put(MakeRecord("t", "once", 20), std::nullopt);
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron@20", kAheadMark), Pair("t/once", 0u)));
  this->harness_.Reopen();
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron@20", kAheadMark), Pair("t/once", 0u)));
  const Mutation delivered = Mutation::MarkAttempt("t", "cron@20", 20, 1, 7);
  ASSERT_OK(this->store().Apply({&delivered, 1}, Durability::kNoSync));
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron@20", 1u), Pair("t/once", 0u)));
  child.mutable_job()->set_attempts(1);
  this->Put(child, 20);
  EXPECT_THAT(this->Marks(),
              ElementsAre(Pair("t/cron@20", 0u), Pair("t/once", 0u)));
  ExpectDueIndexConsistent(Dump(this->store()));
}

TYPED_TEST(JobStoreTest, AnAttemptMarkNeedsTheJobsDueEntry) {
  this->Put(MakeRecord("t", "live", 10), std::nullopt);
  this->Put(MakeRecord("t", "dead", 10, JOB_STATE_DEAD), std::nullopt);
  const testing::StoreDump before = Dump(this->store());
  for (const Mutation& m : {Mutation::MarkAttempt("t", "dead", 10, 1, 7),
                            Mutation::MarkAttempt("t", "never", 10, 1, 7),
                            Mutation::MarkAttempt("t", "live", 11, 1, 7)}) {
    SCOPED_TRACE(m.id());
    const absl::Status s = this->store().Apply({&m, 1}, Durability::kNoSync);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("t\\000" + std::string(m.id())));
  }
  EXPECT_EQ(Dump(this->store()), before);
  EXPECT_THAT(this->Marks(), ElementsAre(Pair("t/live", 0u)));
}

// Layout 6: every due entry carries its job's payload size, through puts,
// attempt marks and a reopen, so that recovery counts the payload bytes
// pending without reading a record.
TYPED_TEST(JobStoreTest, EveryDueEntryCarriesItsJobsPayloadSize) {
  this->Put(MakeRecord("t", "empty", 10, JOB_STATE_SCHEDULED, ""),
            std::nullopt);
  this->Put(
      MakeRecord("t", "big", 10, JOB_STATE_SCHEDULED, std::string(70'000, 'x')),
      std::nullopt);
  JobRecord parent = MakeRecord("t", "cron", 20, JOB_STATE_SCHEDULED, "abc");
  parent.mutable_job()->mutable_recurring();
  this->Put(parent, std::nullopt);
  this->Put(MakeRecord("t", "dead", 20, JOB_STATE_DEAD), std::nullopt);
  const Mutation mark = Mutation::MarkAttempt("t", "big", 10, 2, 70'000);
  ASSERT_OK(this->store().Apply({&mark, 1}, Durability::kNoSync));
  const std::map<std::string, DueValue> want = {{"t/big", {2, 70'000}},
                                                {"t/cron", {kRecurringMark, 3}},
                                                {"t/empty", {0, 0}}};
  EXPECT_EQ(this->Values(), want);
  this->harness_.Reopen();
  EXPECT_EQ(this->Values(), want);
  // A put with another payload (a REPLACE) stores the new size, and clears
  // the attempt mark.
  this->Put(MakeRecord("t", "big", 30, JOB_STATE_SCHEDULED, "12345"), 10);
  EXPECT_EQ(this->Values().at("t/big"), (DueValue{0, 5}));
  ExpectDueIndexConsistent(Dump(this->store()));
}

}  // namespace
}  // namespace delayd::storage
