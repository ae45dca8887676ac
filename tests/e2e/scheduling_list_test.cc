// End to end: ListJobs against the real binary — pagination over thousands
// of jobs (every job exactly once, in id order, consistent while jobs come
// and go), and its filters (states, due range, id prefix, include_payload).
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/e2e/scheduling_fixture.h"

namespace delayd::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;

// 3,000 jobs, written by ScheduleBatch in random order.
class PaginationTest : public SchedulingTest {
 protected:
  static constexpr int kJobs = 3000;

  void SetUp() override {
    SchedulingTest::SetUp();
    for (int i = 0; i < kJobs; ++i) {
      expected_.push_back(absl::StrFormat("job-%05d", i));
    }
    std::vector<std::string> shuffled = expected_;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
    for (int b = 0; b < kJobs / 1000; ++b) {
      v1::ScheduleBatchRequest batch;
      for (int i = 0; i < 1000; ++i) {
        *batch.add_requests() = Request(
            Spec("pages", shuffled[b * 1000 + i], absl::Hours(1), "payload"));
      }
      auto reply = client_->ScheduleBatch(batch);
      ASSERT_RPC_OK(reply);
      ASSERT_EQ(reply.response.results_size(), 1000);
      for (const v1::ScheduleResult& result : reply.response.results()) {
        ASSERT_EQ(result.code(), 0) << result.message();
        ASSERT_TRUE(result.created());
      }
    }
  }

  std::vector<std::string> expected_;  // sorted
};

TEST_F(PaginationTest, EveryJobExactlyOnceInOrder) {
  for (uint32_t page_size : {0u, 7u, 1000u}) {
    SCOPED_TRACE(page_size);
    v1::ListJobsRequest query;
    query.set_topic("pages");
    query.set_page_size(page_size);
    const size_t want_size = page_size == 0 ? 100 : page_size;
    std::vector<std::string> ids;
    int pages = 0;
    while (true) {
      auto page = client_->ListJobs(query);
      ASSERT_RPC_OK(page);
      ++pages;
      const bool last = page.response.next_page_token().empty();
      // Full pages; the last holds the rest, never zero.
      if (!last) {
        EXPECT_EQ(page.response.jobs_size(), static_cast<int>(want_size));
      }
      EXPECT_GT(page.response.jobs_size(), 0);
      for (const v1::Job& job : page.response.jobs()) {
        EXPECT_EQ(job.payload(), "");  // include_payload unset
        ids.push_back(job.id());
      }
      if (last) break;
      query.set_page_token(page.response.next_page_token());
    }
    EXPECT_EQ(pages, static_cast<int>((kJobs + want_size - 1) / want_size));
    EXPECT_EQ(ids, expected_);
  }
  EXPECT_EQ(client_->StatsOf("pages").scheduled(), 3000u);
}

TEST_F(PaginationTest, ListingTwiceGivesTheSameJobs) {
  v1::ListJobsRequest query;
  query.set_topic("pages");
  query.set_page_size(333);
  query.set_include_payload(true);
  const std::vector<v1::Job> first = client_->ListAll(query);
  const std::vector<v1::Job> second = client_->ListAll(query);
  ASSERT_EQ(first.size(), static_cast<size_t>(kJobs));
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].payload(), "payload");
    EXPECT_TRUE(MessageDifferencer::Equals(first[i], second[i])) << i;
  }
}

TEST_F(PaginationTest, ChangesBehindOrAheadOfTheCursorKeepPagesConsistent) {
  v1::ListJobsRequest query;
  query.set_topic("pages");
  query.set_page_size(500);
  auto page = client_->ListJobs(query);
  ASSERT_RPC_OK(page);
  ASSERT_EQ(page.response.jobs_size(), 500);
  std::vector<std::string> ids;
  for (const v1::Job& job : page.response.jobs()) ids.push_back(job.id());
  // Behind the cursor: a new job and a canceled one; ahead of it: the same.
  ASSERT_RPC_OK(client_->Schedule(Request(Spec("pages", "job-00100x"))));
  ASSERT_RPC_OK(client_->Cancel("pages", "job-00050"));
  ASSERT_RPC_OK(client_->Schedule(Request(Spec("pages", "job-02500x"))));
  ASSERT_RPC_OK(client_->Cancel("pages", "job-02000"));
  query.set_page_token(page.response.next_page_token());
  while (!query.page_token().empty()) {
    page = client_->ListJobs(query);
    ASSERT_RPC_OK(page);
    for (const v1::Job& job : page.response.jobs()) ids.push_back(job.id());
    query.set_page_token(page.response.next_page_token());
  }
  std::vector<std::string> want;
  for (const std::string& id : expected_) {
    if (id != "job-02000") want.push_back(id);
    if (id == "job-02500") want.push_back("job-02500x");
  }
  EXPECT_EQ(ids, want);
}

class FilterTest : public SchedulingTest {
 protected:
  void SetUp() override {
    SchedulingTest::SetUp();
    const absl::Time now = absl::Now();
    for (const auto& [id, delay] :
         std::vector<std::pair<std::string, absl::Duration>>{
             {"a/1", absl::ZeroDuration()},
             {"a/2", absl::Minutes(10)},
             {"a/3", absl::Hours(2)},
             {"b/1", absl::ZeroDuration()},
             {"b/2", absl::Hours(24)}}) {
      auto reply = client_->Schedule(Request(SpecAt(
          "filters", id, absl::FromUnixMillis(absl::ToUnixMillis(now + delay)),
          "payload of " + id)));
      ASSERT_RPC_OK(reply);
      due_[id] = FromProto(reply.response.job().fire_at());
    }
    WaitReady("filters", 2);
  }

  std::vector<std::string> List(v1::ListJobsRequest query) {
    query.set_topic("filters");
    return IdsOf(client_->ListAll(query));
  }

  std::map<std::string, absl::Time> due_;
};

using Ids = std::vector<std::string>;

TEST_F(FilterTest, States) {
  v1::ListJobsRequest query;
  EXPECT_EQ(List(query), (Ids{"a/1", "a/2", "a/3", "b/1", "b/2"}));
  query.add_states(v1::JOB_STATE_READY);
  EXPECT_EQ(List(query), (Ids{"a/1", "b/1"}));
  query.clear_states();
  query.add_states(v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(List(query), (Ids{"a/2", "a/3", "b/2"}));
  query.add_states(v1::JOB_STATE_READY);
  EXPECT_EQ(List(query), (Ids{"a/1", "a/2", "a/3", "b/1", "b/2"}));
  query.clear_states();
  query.add_states(v1::JOB_STATE_DEAD);
  query.add_states(v1::JOB_STATE_IN_FLIGHT);
  EXPECT_EQ(List(query), Ids{});
}

TEST_F(FilterTest, DueRangeIsInclusiveExclusive) {
  v1::ListJobsRequest query;
  *query.mutable_due_after() = ToProto(due_["a/2"]);
  *query.mutable_due_before() = ToProto(due_["b/2"]);
  EXPECT_EQ(List(query), (Ids{"a/2", "a/3"}));
  *query.mutable_due_after() = ToProto(due_["a/2"] + absl::Milliseconds(1));
  EXPECT_EQ(List(query), (Ids{"a/3"}));
  query.clear_due_after();
  *query.mutable_due_before() = ToProto(due_["a/2"]);
  EXPECT_EQ(List(query), (Ids{"a/1", "b/1"}));
  query.clear_due_before();
  *query.mutable_due_after() = ToProto(due_["a/3"]);
  EXPECT_EQ(List(query), (Ids{"a/3", "b/2"}));
}

TEST_F(FilterTest, PrefixAndCombinations) {
  v1::ListJobsRequest query;
  query.set_id_prefix("a/");
  EXPECT_EQ(List(query), (Ids{"a/1", "a/2", "a/3"}));
  query.add_states(v1::JOB_STATE_READY);
  EXPECT_EQ(List(query), (Ids{"a/1"}));
  query.clear_states();
  *query.mutable_due_after() = ToProto(due_["a/2"]);
  EXPECT_EQ(List(query), (Ids{"a/2", "a/3"}));
  query.set_id_prefix("c");
  EXPECT_EQ(List(query), Ids{});
  // A topic with no jobs lists nothing.
  v1::ListJobsRequest other;
  other.set_topic("filters.none");
  EXPECT_TRUE(client_->ListAll(other).empty());
}

TEST_F(FilterTest, FiltersHoldAcrossPages) {
  v1::ListJobsRequest query;
  query.set_topic("filters");
  query.add_states(v1::JOB_STATE_SCHEDULED);
  query.set_page_size(1);
  Ids ids;
  int pages = 0;
  while (true) {
    auto page = client_->ListJobs(query);
    ASSERT_RPC_OK(page);
    ++pages;
    ASSERT_EQ(page.response.jobs_size(), 1);
    ids.push_back(page.response.jobs(0).id());
    if (page.response.next_page_token().empty()) break;
    query.set_page_token(page.response.next_page_token());
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ids, (Ids{"a/2", "a/3", "b/2"}));
}

TEST_F(FilterTest, PayloadOnlyWhenAsked) {
  v1::ListJobsRequest query;
  query.set_topic("filters");
  for (const v1::Job& job : client_->ListAll(query)) {
    EXPECT_EQ(job.payload(), "") << job.id();
    EXPECT_EQ(job.topic(), "filters");
    EXPECT_TRUE(job.has_fire_at());
  }
  query.set_include_payload(true);
  const std::vector<v1::Job> jobs = client_->ListAll(query);
  ASSERT_EQ(jobs.size(), 5u);
  for (const v1::Job& job : jobs) {
    EXPECT_EQ(job.payload(), "payload of " + job.id());
    auto got = client_->GetJob("filters", job.id());
    ASSERT_RPC_OK(got);
    EXPECT_TRUE(MessageDifferencer::Equals(got.response, job)) << job.id();
  }
}

}  // namespace
}  // namespace delayd::testing
