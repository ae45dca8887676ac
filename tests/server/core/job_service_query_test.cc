// JobService: Reschedule, Cancel, CancelByPrefix, GetJob and ListJobs over
// an in-memory store and a fake clock (no timer thread). GetStats is in
// job_service_stats_test.cc.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Ids(const v1::ListJobsResponse& r) {
  std::vector<std::string> ids;
  for (const v1::Job& job : r.jobs()) ids.push_back(job.id());
  return ids;
}

std::vector<int64_t> DueEntries(const storage::JobStore& store) {
  std::vector<int64_t> due;
  EXPECT_OK(store.ScanDue(0, INT64_MAX,
                          [&](int64_t ms, std::string_view, std::string_view) {
                            due.push_back(ms);
                            return true;
                          }));
  return due;
}

TEST_F(JobServiceTest, RescheduleMovesTheDueTimeAndTheTimer) {
  MustSchedule("t", "a", 10'000, "p");
  clock_.AdvanceMs(5);
  v1::RescheduleRequest req;
  *req.mutable_key() = Key("t", "a");
  *req.mutable_delay() = DurationMs(1000);
  ASSERT_OK_AND_ASSIGN(v1::RescheduleResponse r, service().Reschedule(req));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 5 + 1000);
  EXPECT_EQ(Ms(r.job().updated_at()), kStartMs + 5);
  EXPECT_EQ(Ms(r.job().created_at()), kStartMs);
  EXPECT_EQ(r.job().payload(), "p");
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_THAT(DueEntries(memory_), ElementsAre(kStartMs + 5 + 1000));
  EXPECT_EQ(memory_.stats().synced_writes, 2u);

  ASSERT_OK_AND_ASSIGN(r, service().Reschedule(RescheduleAtReq(
                              "t", "a", kStartMs + 86'400'000)));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 86'400'000);
  ASSERT_OK_AND_ASSIGN(v1::Job got, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(got.SerializeAsString(), r.job().SerializeAsString());
  EXPECT_THAT(DueEntries(memory_), ElementsAre(kStartMs + 86'400'000));
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, 1);

  // No `when`: due now.
  v1::RescheduleRequest now;
  *now.mutable_key() = Key("t", "a");
  ASSERT_OK_AND_ASSIGN(r, service().Reschedule(now));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 5);
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_READY);
}

TEST_F(JobServiceTest, RescheduleOfNoLiveJobIsNotFound) {
  PutRecord("t", "done", v1::JOB_STATE_DONE, kStartMs);
  PutRecord("t", "canceled", v1::JOB_STATE_CANCELED, kStartMs);
  const std::string before = State();
  for (const char* id : {"missing", "done", "canceled"}) {
    absl::Status s =
        service().Reschedule(RescheduleAtReq("t", id, kStartMs + 1)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << id;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("key:"));
  }
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, RescheduleOfDeadOrInFlightJobIsFailedPrecondition) {
  PutRecord("t", "dead", v1::JOB_STATE_DEAD, kStartMs - 5);
  PutRecord("t", "flying", v1::JOB_STATE_IN_FLIGHT, kStartMs - 5);
  const std::string before = State();
  for (const char* id : {"dead", "flying"}) {
    absl::Status s =
        service().Reschedule(RescheduleAtReq("t", id, kStartMs + 1)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << id << s;
  }
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, RescheduleRefusesBadInputAndChangesNothing) {
  MustSchedule("t", "a", 1000);
  const std::string before = State();
  ExpectInvalid(
      service().Reschedule(RescheduleAtReq("", "a", kStartMs)).status(),
      "key.topic");
  ExpectInvalid(
      service().Reschedule(RescheduleAtReq("t", "a\x01", kStartMs)).status(),
      "key.id");
  v1::RescheduleRequest req;
  *req.mutable_key() = Key("t", "a");
  *req.mutable_delay() = DurationMs(-1);
  ExpectInvalid(service().Reschedule(req).status(), "delay");
  ExpectInvalid(
      service()
          .Reschedule(RescheduleAtReq(
              "t", "a",
              kStartMs + absl::ToInt64Milliseconds(limits_.max_schedule_ahead) +
                  1))
          .status(),
      "fire_at");
  req.mutable_fire_at()->set_nanos(-3);
  ExpectInvalid(service().Reschedule(req).status(), "fire_at");
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, CancelAnswersEachOutcome) {
  // Planted IN_FLIGHT/DONE/DEAD records, then a restart so that the counts
  // know them as a running server would.
  PutRecord("t", "flying", v1::JOB_STATE_IN_FLIGHT, kStartMs - 5);
  PutRecord("t", "done", v1::JOB_STATE_DONE, kStartMs - 5);
  PutRecord("t", "dead", v1::JOB_STATE_DEAD, kStartMs - 5);
  Restart();
  ASSERT_OK(service().Recover());
  MustSchedule("t", "waiting", 1000, "p");
  ASSERT_EQ(Counts("t").live, 2);

  ASSERT_OK_AND_ASSIGN(v1::CancelResponse r,
                       service().Cancel(CancelReq("t", "missing")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_FALSE(r.has_job());

  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "waiting")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(r.job().id(), "waiting");
  EXPECT_EQ(r.job().payload(), "p");
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_FALSE(Stored("t", "waiting").has_value());
  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "waiting")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);

  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "flying")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  std::optional<storage::JobRecord> flying = Stored("t", "flying");
  ASSERT_TRUE(flying.has_value());
  EXPECT_EQ(flying->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_FALSE(storage::DueIndexEntryOf(*flying).has_value());
  ASSERT_OK_AND_ASSIGN(v1::Job got, service().GetJob(GetReq("t", "flying")));
  EXPECT_EQ(got.state(), v1::JOB_STATE_CANCELED);
  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "flying")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED);  // still definite

  const std::string before_done = State();
  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "done")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_ALREADY_DONE);
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(State(), before_done);

  ASSERT_OK_AND_ASSIGN(r, service().Cancel(CancelReq("t", "dead")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_FALSE(Stored("t", "dead").has_value());

  EXPECT_THAT(DueEntries(memory_), IsEmpty());
  EXPECT_EQ(service().timers_pending(), 0u);
  EXPECT_EQ(Counts("t").live, 0);
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse stats, service().GetStats({}));
  ASSERT_EQ(stats.topics_size(), 1);
  EXPECT_EQ(stats.topics(0).scheduled(), 0u);
  EXPECT_EQ(stats.topics(0).dead(), 0u);
}

TEST_F(JobServiceTest, CancelRefusesABadKeyAndChangesNothing) {
  MustSchedule("t", "a", 1000);
  const std::string before = State();
  ExpectInvalid(service().Cancel(CancelReq("t t", "a")).status(), "key.topic");
  ExpectInvalid(
      service().Cancel(CancelReq("t", std::string(257, 'a'))).status(),
      "key.id");
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, CancelByPrefixCancelsLiveJobsOfTheTopicWithThePrefix) {
  PutRecord("t", "order-1-flying", v1::JOB_STATE_IN_FLIGHT, kStartMs - 5);
  PutRecord("t", "order-1-dead", v1::JOB_STATE_DEAD, kStartMs - 5);
  PutRecord("t", "order-1-done", v1::JOB_STATE_DONE, kStartMs - 5);
  Restart();
  ASSERT_OK(service().Recover());
  for (const char* id : {"order-1-a", "order-1-b", "order-12-x", "order-2-a"}) {
    MustSchedule("t", id, 1000);
  }
  MustSchedule("u", "order-1-z", 1000);

  v1::CancelByPrefixRequest req;
  req.set_topic("t");
  req.set_id_prefix("order-1-");
  ASSERT_OK_AND_ASSIGN(v1::CancelByPrefixResponse r,
                       service().CancelByPrefix(req));
  EXPECT_EQ(r.canceled(), 3u);  // a, b and the one in flight
  EXPECT_FALSE(Stored("t", "order-1-a").has_value());
  EXPECT_FALSE(Stored("t", "order-1-b").has_value());
  EXPECT_EQ(Stored("t", "order-1-flying")->job().state(),
            v1::JOB_STATE_CANCELED);
  EXPECT_EQ(Stored("t", "order-1-dead")->job().state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(Stored("t", "order-1-done")->job().state(), v1::JOB_STATE_DONE);
  EXPECT_TRUE(Stored("t", "order-12-x").has_value());
  EXPECT_TRUE(Stored("t", "order-2-a").has_value());
  EXPECT_TRUE(Stored("u", "order-1-z").has_value());
  EXPECT_EQ(Counts("t").live, 2);
  EXPECT_EQ(Counts("u").live, 1);
  EXPECT_EQ(service().timers_pending(), 3u);
  EXPECT_EQ(DueEntries(memory_).size(), 3u);

  // Nothing left to cancel: 0. An empty prefix: the whole topic.
  ASSERT_OK_AND_ASSIGN(r, service().CancelByPrefix(req));
  EXPECT_EQ(r.canceled(), 0u);
  req.clear_id_prefix();
  ASSERT_OK_AND_ASSIGN(r, service().CancelByPrefix(req));
  EXPECT_EQ(r.canceled(), 2u);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(Counts("u").live, 1);
}

TEST_F(JobServiceTest, CancelByPrefixCancelsThousandsAcrossChunks) {
  int64_t kept = 0;
  for (int b = 0; b < 3; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      const bool keep = i % 3 == 0;
      kept += keep;
      *batch.add_requests() = ScheduleReq(
          "t", absl::StrCat(keep ? "keep-" : "drop-", b, "-", i), 1000 + i);
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  v1::CancelByPrefixRequest req;
  req.set_topic("t");
  req.set_id_prefix("drop-");
  ASSERT_OK_AND_ASSIGN(v1::CancelByPrefixResponse r,
                       service().CancelByPrefix(req));
  EXPECT_EQ(r.canceled(), static_cast<uint64_t>(3000 - kept));
  EXPECT_EQ(Counts("t").live, kept);
  EXPECT_EQ(service().timers_pending(), static_cast<size_t>(kept));
  EXPECT_EQ(DueEntries(memory_).size(), static_cast<size_t>(kept));
  int64_t left = 0;
  ASSERT_OK(memory_.ScanJobs("t", "", "", [&](const storage::JobRecord& rec) {
    EXPECT_THAT(rec.job().id(), ::testing::StartsWith("keep-"));
    ++left;
    return true;
  }));
  EXPECT_EQ(left, kept);
}

TEST_F(JobServiceTest, CancelByPrefixRefusesBadInputAndChangesNothing) {
  MustSchedule("t", "a", 1000);
  const std::string before = State();
  v1::CancelByPrefixRequest req;
  ExpectInvalid(service().CancelByPrefix(req).status(), "topic");
  req.set_topic("t");
  req.set_id_prefix("a\n");
  ExpectInvalid(service().CancelByPrefix(req).status(), "id_prefix");
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, GetJobShowsReadyOnceDueByTheClock) {
  ExpectInvalid(service().GetJob(GetReq("", "a")).status(), "key.topic");
  absl::Status missing = service().GetJob(GetReq("t", "a")).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), ::testing::StartsWith("key:"));

  MustSchedule("t", "a", 1000);
  clock_.AdvanceMs(999);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
  clock_.AdvanceMs(1);
  ASSERT_OK_AND_ASSIGN(job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_READY);
  // Stored as SCHEDULED: READY is how it is shown.
  EXPECT_EQ(Stored("t", "a")->job().state(), v1::JOB_STATE_SCHEDULED);
}

TEST_F(JobServiceTest, ListJobsFiltersAndOrdersById) {
  MustSchedule("t", "b", 3000, "pb");
  MustSchedule("t", "a", 1000, "pa");
  MustSchedule("t", "c/2", 5000, "pc2");
  MustSchedule("t", "aa", 2000, "paa");
  MustSchedule("t", "c/1", 4000, "pc1");
  MustSchedule("other", "a", 1000);
  PutRecord("t", "dead", v1::JOB_STATE_DEAD, kStartMs + 500);
  clock_.AdvanceMs(2000);  // a and aa are due: READY

  v1::ListJobsRequest req;
  req.set_topic("t");
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("a", "aa", "b", "c/1", "c/2", "dead"));
  EXPECT_EQ(r.next_page_token(), "");
  for (const v1::Job& job : r.jobs()) EXPECT_EQ(job.payload(), "") << job.id();
  EXPECT_EQ(r.jobs(0).state(), v1::JOB_STATE_READY);
  EXPECT_EQ(r.jobs(2).state(), v1::JOB_STATE_SCHEDULED);

  req.set_include_payload(true);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_EQ(r.jobs(0).payload(), "pa");
  EXPECT_EQ(r.jobs(4).payload(), "pc2");
  req.set_include_payload(false);

  req.add_states(v1::JOB_STATE_READY);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("a", "aa"));
  req.add_states(v1::JOB_STATE_DEAD);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("a", "aa", "dead"));
  req.clear_states();
  req.add_states(v1::JOB_STATE_SCHEDULED);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("b", "c/1", "c/2"));
  req.clear_states();

  // due_after inclusive, due_before exclusive.
  *req.mutable_due_after() = TimestampMs(kStartMs + 2000);
  *req.mutable_due_before() = TimestampMs(kStartMs + 4000);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("aa", "b"));
  req.clear_due_before();
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("aa", "b", "c/1", "c/2"));
  req.clear_due_after();
  *req.mutable_due_before() = TimestampMs(kStartMs + 1000);
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("dead"));
  req.clear_due_before();

  req.set_id_prefix("c/");
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), ElementsAre("c/1", "c/2"));
  req.set_id_prefix("zz");
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), IsEmpty());
  req.set_topic("nothing-here");
  req.clear_id_prefix();
  ASSERT_OK_AND_ASSIGN(r, service().ListJobs(req));
  EXPECT_THAT(Ids(r), IsEmpty());
}

// Pages through `req` to the end; checks every page's size.
std::vector<std::string> ListAll(JobService& service, v1::ListJobsRequest req,
                                 size_t page_size, int* pages) {
  std::vector<std::string> ids;
  *pages = 0;
  while (true) {
    absl::StatusOr<v1::ListJobsResponse> r = service.ListJobs(req);
    EXPECT_OK(r);
    if (!r.ok() || *pages > 10'000) break;
    ++*pages;
    EXPECT_LE(static_cast<size_t>(r->jobs_size()), page_size);
    for (const v1::Job& job : r->jobs()) ids.push_back(job.id());
    if (r->next_page_token().empty()) break;
    EXPECT_EQ(static_cast<size_t>(r->jobs_size()), page_size);
    req.set_page_token(r->next_page_token());
  }
  return ids;
}

TEST_F(JobServiceTest, ListJobsPaginatesThousandsOfJobsEachExactlyOnceInOrder) {
  constexpr int kJobs = 3000;
  std::vector<int> order(kJobs);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<std::string> all, due_soon;
  for (int b = 0; b < kJobs / 1000; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = b * 1000; i < (b + 1) * 1000; ++i) {
      // Unpadded: byte order is not numeric order.
      const std::string id = absl::StrCat("job-", order[i]);
      const int64_t delay = order[i] % 2 == 0 ? 10 : 100'000;
      *batch.add_requests() = ScheduleReq("t", id, delay);
      all.push_back(id);
      if (delay == 10) due_soon.push_back(id);
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  MustSchedule("t2", "job-1", 10);
  std::sort(all.begin(), all.end());
  std::sort(due_soon.begin(), due_soon.end());
  clock_.AdvanceMs(10);

  v1::ListJobsRequest req;
  req.set_topic("t");
  int pages = 0;
  EXPECT_EQ(ListAll(service(), req, 100, &pages), all);  // 0 means 100
  EXPECT_EQ(pages, 30);
  req.set_page_size(1000);
  EXPECT_EQ(ListAll(service(), req, 1000, &pages), all);
  EXPECT_EQ(pages, 3);  // the last full page has no token
  req.set_page_size(7);
  EXPECT_EQ(ListAll(service(), req, 7, &pages), all);
  req.add_states(v1::JOB_STATE_READY);
  req.set_page_size(33);
  EXPECT_EQ(ListAll(service(), req, 33, &pages), due_soon);
  req.clear_states();
  req.set_page_size(7);
  req.set_id_prefix("job-12");
  std::vector<std::string> prefixed;
  std::copy_if(
      all.begin(), all.end(), std::back_inserter(prefixed),
      [](const std::string& id) { return id.rfind("job-12", 0) == 0; });
  EXPECT_EQ(ListAll(service(), req, 7, &pages), prefixed);
}

TEST_F(JobServiceTest, ListJobsRefusesBadInput) {
  for (int i = 0; i < 5; ++i) MustSchedule("t", absl::StrCat("j", i), 1000);
  const std::string before = State();
  v1::ListJobsRequest req;
  ExpectInvalid(service().ListJobs(req).status(), "topic");
  req.set_topic("t");
  req.set_id_prefix(std::string("\xff"));
  ExpectInvalid(service().ListJobs(req).status(), "id_prefix");
  req.clear_id_prefix();
  req.add_states(static_cast<v1::JobState>(99));
  ExpectInvalid(service().ListJobs(req).status(), "states[0]");
  req.clear_states();
  req.add_states(v1::JOB_STATE_UNSPECIFIED);
  ExpectInvalid(service().ListJobs(req).status(), "states[0]");
  req.clear_states();
  req.mutable_due_after()->set_seconds(-62135596801);  // before year 1
  ExpectInvalid(service().ListJobs(req).status(), "due_after");
  req.clear_due_after();
  req.mutable_due_before()->set_nanos(-1);
  ExpectInvalid(service().ListJobs(req).status(), "due_before");
  req.clear_due_before();
  req.set_page_size(1001);
  ExpectInvalid(service().ListJobs(req).status(), "page_size");
  req.set_page_size(1000);
  EXPECT_OK(service().ListJobs(req));

  req.set_page_size(2);
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse first, service().ListJobs(req));
  ASSERT_NE(first.next_page_token(), "");
  for (const char* bad : {"garbage!", "AAAA", "bm90IGEgdG9rZW4"}) {
    req.set_page_token(bad);
    ExpectInvalid(service().ListJobs(req).status(), "page_token");
  }
  // The token is bound to the query...
  v1::ListJobsRequest other = req;
  other.set_page_token(first.next_page_token());
  other.set_id_prefix("j");
  ExpectInvalid(service().ListJobs(other).status(), "page_token");
  other.clear_id_prefix();
  other.add_states(v1::JOB_STATE_SCHEDULED);
  ExpectInvalid(service().ListJobs(other).status(), "page_token");
  other.clear_states();
  *other.mutable_due_before() = TimestampMs(kStartMs + 5000);
  ExpectInvalid(service().ListJobs(other).status(), "page_token");
  other.clear_due_before();
  other.set_topic("t2");
  ExpectInvalid(service().ListJobs(other).status(), "page_token");
  // ...but not to the page size or payload choice.
  other.set_topic("t");
  other.set_page_size(10);
  other.set_include_payload(true);
  ASSERT_OK_AND_ASSIGN(v1::ListJobsResponse rest, service().ListJobs(other));
  EXPECT_THAT(Ids(rest), ElementsAre("j2", "j3", "j4"));
  EXPECT_EQ(State(), before);
}

}  // namespace
}  // namespace delayd::server::testing
