// End to end: the scheduling rpcs of delayd.v1.DelayQueue against the real
// binary over gRPC — Schedule with every if_exists mode, generated ids,
// ScheduleBatch, Reschedule, Cancel, CancelByPrefix, GetJob,
// GetStats, and jobs surviving a SIGTERM and a SIGKILL restart. ListJobs
// (pagination over thousands of jobs, filters) is in scheduling_list_test.cc,
// refusals of bad input in scheduling_limits_test.cc.
#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/e2e/scheduling_fixture.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;

TEST_F(SchedulingTest, ScheduleReturnsTheStoredJobAndGetJobShowsIt) {
  v1::JobSpec spec = Spec("orders.close", "order-8812", absl::Minutes(30),
                          std::string("\0\xffpay", 5));
  (*spec.mutable_labels())["tenant"] = "acme";
  spec.mutable_retry()->set_max_attempts(3);
  const absl::Time before = absl::Now();
  auto reply = client_->Schedule(Request(spec));
  const absl::Time after = absl::Now();
  ASSERT_RPC_OK(reply);
  EXPECT_TRUE(reply.response.created());
  const v1::Job& job = reply.response.job();
  EXPECT_EQ(job.topic(), "orders.close");
  EXPECT_EQ(job.id(), "order-8812");
  EXPECT_EQ(job.payload(), std::string("\0\xffpay", 5));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_GE(FromProto(job.fire_at()),
            before + absl::Minutes(30) - absl::Milliseconds(1));
  EXPECT_LE(FromProto(job.fire_at()), after + absl::Minutes(30));
  EXPECT_EQ(job.attempts(), 0u);
  EXPECT_EQ(job.retry().max_attempts(), 3u);     // given
  EXPECT_EQ(job.retry().lease().seconds(), 30);  // defaults filled in
  EXPECT_EQ(job.retry().initial_backoff().seconds(), 1);
  EXPECT_EQ(job.retry().max_backoff().seconds(), 600);
  EXPECT_EQ(job.retry().backoff_multiplier(), 2.0);
  EXPECT_EQ(job.labels().at("tenant"), "acme");
  EXPECT_GE(FromProto(job.created_at()), before - absl::Milliseconds(1));
  EXPECT_LE(FromProto(job.created_at()), after);
  EXPECT_TRUE(MessageDifferencer::Equals(job.created_at(), job.updated_at()));
  EXPECT_EQ(job.last_error(), "");

  auto got = client_->GetJob("orders.close", "order-8812");
  ASSERT_RPC_OK(got);
  EXPECT_TRUE(MessageDifferencer::Equals(got.response, job))
      << got.response.DebugString() << "\nvs\n"
      << job.DebugString();

  auto missing = client_->GetJob("orders.close", "order-8813");
  EXPECT_EQ(missing.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.status.error_message().find("order-8813"),
            std::string::npos)
      << missing.status.error_message();
}

TEST_F(SchedulingTest, UnsetWhenIsDueNowAndShowsReady) {
  const absl::Time before = absl::Now();
  auto reply =
      client_->Schedule(Request(Spec("now", "j", absl::InfiniteDuration())));
  ASSERT_RPC_OK(reply);
  EXPECT_GE(FromProto(reply.response.job().fire_at()),
            before - absl::Milliseconds(1));
  EXPECT_LE(FromProto(reply.response.job().fire_at()), absl::Now());
  auto got = client_->GetJob("now", "j");
  ASSERT_RPC_OK(got);
  EXPECT_EQ(got.response.state(), v1::JOB_STATE_READY);
  WaitReady("now", 1);
}

TEST_F(SchedulingTest, IfExistsFailAcceptsAnIdenticalRetry) {
  for (v1::IfExists mode : {v1::IF_EXISTS_FAIL, v1::IF_EXISTS_UNSPECIFIED}) {
    SCOPED_TRACE(v1::IfExists_Name(mode));
    const std::string id = "order-" + v1::IfExists_Name(mode);
    v1::JobSpec spec = Spec("orders.close", id, absl::Minutes(30), "p");
    (*spec.mutable_labels())["a"] = "1";
    (*spec.mutable_labels())["b"] = "2";
    auto first = client_->Schedule(Request(spec, mode));
    ASSERT_RPC_OK(first);
    EXPECT_TRUE(first.response.created());
    const std::string before = client_->Snapshot();
    absl::SleepFor(absl::Milliseconds(5));  // a retry comes later
    // The retry of the same request: OK, the existing job, due time not
    // moved.
    auto retry = client_->Schedule(Request(spec, mode));
    ASSERT_RPC_OK(retry);
    EXPECT_FALSE(retry.response.created());
    EXPECT_TRUE(
        MessageDifferencer::Equals(retry.response.job(), first.response.job()))
        << retry.response.job().DebugString();
    EXPECT_EQ(client_->Snapshot(), before);
  }
  // The same with an absolute time.
  const v1::JobSpec at =
      SpecAt("orders.close", "at", absl::Now() + absl::Hours(2));
  ASSERT_RPC_OK(client_->Schedule(Request(at)));
  auto retry = client_->Schedule(Request(at));
  ASSERT_RPC_OK(retry);
  EXPECT_FALSE(retry.response.created());
}

TEST_F(SchedulingTest, IfExistsFailRefusesADifferentSpec) {
  const v1::JobSpec spec =
      Spec("orders.close", "order-1", absl::Minutes(30), "original");
  auto first = client_->Schedule(Request(spec));
  ASSERT_RPC_OK(first);
  v1::JobSpec other_payload = spec;
  other_payload.set_payload("changed");
  v1::JobSpec other_delay = spec;
  *other_delay.mutable_delay() = ToProto(absl::Minutes(31));
  v1::JobSpec other_labels = spec;
  (*other_labels.mutable_labels())["x"] = "y";
  v1::JobSpec other_retry = spec;
  other_retry.mutable_retry()->set_max_attempts(2);
  for (v1::IfExists mode : {v1::IF_EXISTS_FAIL, v1::IF_EXISTS_UNSPECIFIED}) {
    for (const v1::JobSpec& changed :
         {other_payload, other_delay, other_labels, other_retry}) {
      SCOPED_TRACE(changed.ShortDebugString());
      const std::string before = client_->Snapshot();
      auto reply = client_->Schedule(Request(changed, mode));
      EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
      EXPECT_NE(reply.status.error_message().find("order-1"), std::string::npos)
          << reply.status.error_message();
      EXPECT_NE(reply.status.error_message().find("IF_EXISTS_FAIL"),
                std::string::npos)
          << reply.status.error_message();
      EXPECT_EQ(client_->Snapshot(), before);
    }
  }
  auto got = client_->GetJob("orders.close", "order-1");
  ASSERT_RPC_OK(got);
  EXPECT_EQ(got.response.payload(), "original");
  EXPECT_TRUE(MessageDifferencer::Equals(got.response, first.response.job()));
}

TEST_F(SchedulingTest, IfExistsKeepLeavesTheExistingJob) {
  // No job yet: KEEP creates it.
  auto first = client_->Schedule(
      Request(Spec("rate", "order-9", absl::Hours(48), "five stars"),
              v1::IF_EXISTS_KEEP));
  ASSERT_RPC_OK(first);
  EXPECT_TRUE(first.response.created());
  const std::string before = client_->Snapshot();
  auto again = client_->Schedule(Request(
      Spec("rate", "order-9", absl::Hours(1), "other"), v1::IF_EXISTS_KEEP));
  ASSERT_RPC_OK(again);
  EXPECT_FALSE(again.response.created());
  EXPECT_TRUE(
      MessageDifferencer::Equals(again.response.job(), first.response.job()))
      << again.response.job().DebugString();
  EXPECT_EQ(client_->Snapshot(), before);
}

TEST_F(SchedulingTest, IfExistsReplaceIsAHeartbeatUpsert) {
  // The "mark offline unless a keepalive comes within 30 s" pattern: every
  // heartbeat pushes the timer back.
  auto first = client_->Schedule(
      Request(Spec("presence.offline", "user-42", absl::Seconds(30), "hb-0"),
              v1::IF_EXISTS_REPLACE));
  ASSERT_RPC_OK(first);
  EXPECT_TRUE(first.response.created());
  v1::Job last = first.response.job();
  for (int i = 1; i <= 5; ++i) {
    SCOPED_TRACE(i);
    auto beat = client_->Schedule(
        Request(Spec("presence.offline", "user-42", absl::Seconds(30 + i),
                     absl::StrFormat("hb-%d", i)),
                v1::IF_EXISTS_REPLACE));
    ASSERT_RPC_OK(beat);
    EXPECT_TRUE(beat.response.created());
    const v1::Job& job = beat.response.job();
    EXPECT_GT(FromProto(job.fire_at()), FromProto(last.fire_at()));
    EXPECT_EQ(job.payload(), absl::StrFormat("hb-%d", i));
    EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
    EXPECT_TRUE(MessageDifferencer::Equals(job.created_at(),
                                           first.response.job().created_at()));
    EXPECT_GE(FromProto(job.updated_at()), FromProto(last.updated_at()));
    last = job;
  }
  EXPECT_EQ(ListIds("presence.offline"), std::vector<std::string>{"user-42"});
  auto got = client_->GetJob("presence.offline", "user-42");
  ASSERT_RPC_OK(got);
  EXPECT_TRUE(MessageDifferencer::Equals(got.response, last));
  const v1::TopicStats stats = client_->StatsOf("presence.offline");
  EXPECT_EQ(stats.scheduled(), 1u);
  EXPECT_EQ(stats.ready(), 0u);
  EXPECT_EQ(stats.due_next_minute(), 1u);

  // A job that already fell due (READY) is put back to SCHEDULED.
  ASSERT_RPC_OK(client_->Schedule(
      Request(Spec("presence.offline", "user-7", absl::ZeroDuration()),
              v1::IF_EXISTS_REPLACE)));
  WaitReady("presence.offline", 1);
  auto revived = client_->Schedule(
      Request(Spec("presence.offline", "user-7", absl::Seconds(30)),
              v1::IF_EXISTS_REPLACE));
  ASSERT_RPC_OK(revived);
  EXPECT_EQ(revived.response.job().state(), v1::JOB_STATE_SCHEDULED);
  const v1::TopicStats after = client_->StatsOf("presence.offline");
  EXPECT_EQ(after.scheduled(), 2u);
  EXPECT_EQ(after.ready(), 0u);
  EXPECT_EQ(after.due_next_minute(), 2u);
}

TEST_F(SchedulingTest, RescheduleMovesTheDueTime) {
  auto created =
      client_->Schedule(Request(Spec("retry.call", "call-1", absl::Hours(1))));
  ASSERT_RPC_OK(created);

  v1::RescheduleRequest request;
  request.mutable_key()->set_topic("retry.call");
  request.mutable_key()->set_id("call-1");
  *request.mutable_delay() = ToProto(absl::Hours(2));
  const absl::Time before = absl::Now();
  auto moved = client_->Reschedule(request);
  ASSERT_RPC_OK(moved);
  EXPECT_GE(FromProto(moved.response.job().fire_at()),
            before + absl::Hours(2) - absl::Milliseconds(1));
  EXPECT_LE(FromProto(moved.response.job().fire_at()),
            absl::Now() + absl::Hours(2));
  EXPECT_EQ(moved.response.job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_TRUE(MessageDifferencer::Equals(moved.response.job().created_at(),
                                         created.response.job().created_at()));
  auto got = client_->GetJob("retry.call", "call-1");
  ASSERT_RPC_OK(got);
  EXPECT_TRUE(MessageDifferencer::Equals(got.response, moved.response.job()));
  EXPECT_EQ(client_->StatsOf("retry.call").due_next_hour(), 0u);

  // To an absolute time, then to "now" (when unset).
  const absl::Time at =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now() + absl::Minutes(10)));
  *request.mutable_fire_at() = ToProto(at);
  auto to_at = client_->Reschedule(request);
  ASSERT_RPC_OK(to_at);
  EXPECT_EQ(FromProto(to_at.response.job().fire_at()), at);
  EXPECT_EQ(client_->StatsOf("retry.call").due_next_hour(), 1u);
  request.clear_when();
  auto to_now = client_->Reschedule(request);
  ASSERT_RPC_OK(to_now);
  EXPECT_EQ(to_now.response.job().state(), v1::JOB_STATE_READY);
  WaitReady("retry.call", 1);
  EXPECT_EQ(client_->StatsOf("retry.call").scheduled(), 0u);

  // A READY job can be moved back into the future.
  *request.mutable_delay() = ToProto(absl::Minutes(5));
  auto back = client_->Reschedule(request);
  ASSERT_RPC_OK(back);
  EXPECT_EQ(back.response.job().state(), v1::JOB_STATE_SCHEDULED);
  WaitReady("retry.call", 0);
  EXPECT_EQ(client_->StatsOf("retry.call").scheduled(), 1u);

  // Unknown and canceled jobs are NOT_FOUND.
  request.mutable_key()->set_id("call-2");
  auto unknown = client_->Reschedule(request);
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.status.error_message().find("key"), std::string::npos);
  ASSERT_RPC_OK(client_->Cancel("retry.call", "call-1"));
  request.mutable_key()->set_id("call-1");
  EXPECT_EQ(client_->Reschedule(request).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(SchedulingTest, CancelSaysCanceledThenNotFound) {
  ASSERT_RPC_OK(client_->Schedule(
      Request(Spec("orders.close", "later", absl::Hours(1), "x"))));
  ASSERT_RPC_OK(client_->Schedule(
      Request(Spec("orders.close", "due", absl::ZeroDuration()))));
  WaitReady("orders.close", 1);

  for (const char* id : {"later", "due"}) {
    SCOPED_TRACE(id);
    auto canceled = client_->Cancel("orders.close", id);
    ASSERT_RPC_OK(canceled);
    EXPECT_EQ(canceled.response.outcome(), v1::CANCEL_OUTCOME_CANCELED);
    ASSERT_TRUE(canceled.response.has_job());
    EXPECT_EQ(canceled.response.job().id(), id);
    EXPECT_EQ(canceled.response.job().state(), v1::JOB_STATE_CANCELED);
    EXPECT_EQ(client_->GetJob("orders.close", id).status.error_code(),
              grpc::StatusCode::NOT_FOUND);
    // A second cancel finds nothing.
    auto again = client_->Cancel("orders.close", id);
    ASSERT_RPC_OK(again);
    EXPECT_EQ(again.response.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
    EXPECT_FALSE(again.response.has_job());
  }
  auto unknown = client_->Cancel("no.such.topic", "nobody");
  ASSERT_RPC_OK(unknown);
  EXPECT_EQ(unknown.response.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_TRUE(ListIds("orders.close").empty());
  const v1::TopicStats stats = client_->StatsOf("orders.close");
  EXPECT_EQ(stats.scheduled(), 0u);
  EXPECT_EQ(stats.ready(), 0u);
  EXPECT_EQ(stats.due_next_day(), 0u);

  // The id is free again.
  auto reborn = client_->Schedule(
      Request(Spec("orders.close", "later", absl::Hours(1), "new")));
  ASSERT_RPC_OK(reborn);
  EXPECT_TRUE(reborn.response.created());
  EXPECT_EQ(reborn.response.job().payload(), "new");
}

TEST_F(SchedulingTest, CancelByPrefixCancelsEverythingForOneOrder) {
  const std::vector<std::string> ids = {"order-12/close",   "order-123/close",
                                        "order-123/rate",   "order-123/remind",
                                        "order-1234/close", "order-124/close"};
  v1::ScheduleBatchRequest batch;
  for (const std::string& id : ids) {
    *batch.add_requests() = Request(Spec(
        "orders", id,
        id == "order-123/remind" ? absl::ZeroDuration() : absl::Minutes(30)));
  }
  *batch.add_requests() = Request(Spec("orders.other", "order-123/rate"));
  ASSERT_RPC_OK(client_->ScheduleBatch(batch));
  WaitReady("orders", 1);

  auto canceled = client_->CancelByPrefix("orders", "order-123/");
  ASSERT_RPC_OK(canceled);
  EXPECT_EQ(canceled.response.canceled(), 3u);
  EXPECT_EQ(ListIds("orders"),
            (std::vector<std::string>{"order-12/close", "order-1234/close",
                                      "order-124/close"}));
  EXPECT_EQ(ListIds("orders.other"),
            std::vector<std::string>{"order-123/rate"});
  v1::TopicStats stats = client_->StatsOf("orders");
  EXPECT_EQ(stats.scheduled(), 3u);
  EXPECT_EQ(stats.ready(), 0u);

  auto again = client_->CancelByPrefix("orders", "order-123/");
  ASSERT_RPC_OK(again);
  EXPECT_EQ(again.response.canceled(), 0u);

  // An empty prefix is the whole topic; other topics are untouched.
  auto all = client_->CancelByPrefix("orders", "");
  ASSERT_RPC_OK(all);
  EXPECT_EQ(all.response.canceled(), 3u);
  EXPECT_TRUE(ListIds("orders").empty());
  EXPECT_EQ(client_->StatsOf("orders").scheduled(), 0u);
  EXPECT_EQ(ListIds("orders.other"),
            std::vector<std::string>{"order-123/rate"});
  EXPECT_EQ(client_->StatsOf("orders.other").scheduled(), 1u);
}

TEST_F(SchedulingTest, CancelByPrefixCoversMoreThanOneChunk) {
  // Over a thousand matching jobs, among others that do not match.
  for (int b = 0; b < 3; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      const int n = b * 1000 + i;
      *batch.add_requests() = Request(Spec(
          "bulk", absl::StrFormat("%s-%05d", n % 3 == 0 ? "keep" : "drop", n)));
    }
    ASSERT_RPC_OK(client_->ScheduleBatch(batch));
  }
  auto canceled = client_->CancelByPrefix("bulk", "drop-");
  ASSERT_RPC_OK(canceled);
  EXPECT_EQ(canceled.response.canceled(), 2000u);
  EXPECT_EQ(ListIds("bulk", "drop-").size(), 0u);
  EXPECT_EQ(ListIds("bulk").size(), 1000u);
  EXPECT_EQ(client_->StatsOf("bulk").scheduled(), 1000u);
}

TEST_F(SchedulingTest, EmptyIdGetsUniqueTimeOrderedIds) {
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    // The same spec each time: still a new job each time.
    auto reply = client_->Schedule(Request(Spec("gen", "", absl::Hours(1))));
    ASSERT_RPC_OK(reply);
    EXPECT_TRUE(reply.response.created());
    ids.push_back(reply.response.job().id());
  }
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 200; ++i) {
    *batch.add_requests() = Request(Spec("gen", "", absl::Hours(1)));
  }
  auto batched = client_->ScheduleBatch(batch);
  ASSERT_RPC_OK(batched);
  ASSERT_EQ(batched.response.results_size(), 200);
  for (const v1::ScheduleResult& result : batched.response.results()) {
    ASSERT_EQ(result.code(), 0) << result.message();
    ids.push_back(result.job().id());
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_FALSE(ids[i].empty());
    EXPECT_LE(ids[i].size(), 256u);
    // Made later, sorts later.
    if (i > 0) {
      EXPECT_LT(ids[i - 1], ids[i]) << "at " << i;
    }
  }
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  // ListJobs (ordered by id) shows them in creation order.
  EXPECT_EQ(ListIds("gen"), ids);
  auto got = client_->GetJob("gen", ids.back());
  ASSERT_RPC_OK(got);
}

TEST_F(SchedulingTest, GetStatsCountsAndDueHorizons) {
  for (const auto& [id, delay] :
       std::vector<std::pair<std::string, absl::Duration>>{
           {"now", absl::ZeroDuration()},
           {"30s", absl::Seconds(30)},
           {"30m", absl::Minutes(30)},
           {"5h", absl::Hours(5)},
           {"2d", absl::Hours(48)}}) {
    ASSERT_RPC_OK(client_->Schedule(Request(Spec("stats.a", id, delay))));
  }
  ASSERT_RPC_OK(
      client_->Schedule(Request(Spec("stats.b", "10s", absl::Seconds(10)))));
  WaitReady("stats.a", 1);

  v1::TopicStats a = client_->StatsOf("stats.a");
  EXPECT_EQ(a.scheduled(), 4u);
  EXPECT_EQ(a.ready(), 1u);
  EXPECT_EQ(a.in_flight(), 0u);
  EXPECT_EQ(a.dead(), 0u);
  EXPECT_EQ(a.subscribers(), 0u);
  EXPECT_EQ(a.due_next_minute(), 1u);
  EXPECT_EQ(a.due_next_hour(), 2u);
  EXPECT_EQ(a.due_next_day(), 3u);

  auto all = client_->GetStats("");
  ASSERT_RPC_OK(all);
  ASSERT_EQ(all.response.topics_size(), 2);
  EXPECT_EQ(all.response.topics(0).topic(), "stats.a");
  EXPECT_EQ(all.response.topics(1).topic(), "stats.b");
  EXPECT_TRUE(MessageDifferencer::Equals(all.response.topics(0), a));
  const v1::TopicStats& b = all.response.topics(1);
  EXPECT_EQ(b.scheduled(), 1u);
  EXPECT_EQ(b.ready(), 0u);
  EXPECT_EQ(b.due_next_minute(), 1u);
  EXPECT_EQ(b.due_next_hour(), 1u);
  EXPECT_EQ(b.due_next_day(), 1u);

  // A topic without jobs has all-zero counts.
  const v1::TopicStats none = client_->StatsOf("stats.none");
  EXPECT_EQ(none.scheduled() + none.ready() + none.due_next_day(), 0u);

  // Counts follow cancels.
  ASSERT_RPC_OK(client_->Cancel("stats.a", "30s"));
  ASSERT_RPC_OK(client_->Cancel("stats.a", "now"));
  a = client_->StatsOf("stats.a");
  EXPECT_EQ(a.scheduled(), 3u);
  EXPECT_EQ(a.ready(), 0u);
  EXPECT_EQ(a.due_next_minute(), 0u);
  EXPECT_EQ(a.due_next_hour(), 1u);
  EXPECT_EQ(a.due_next_day(), 2u);
}

// Jobs of every kind, scheduled before a restart; what GetJob showed.
struct Scheduled {
  std::map<std::string, v1::Job> jobs;
};

void ScheduleMix(SchedulingClient& client, Scheduled& out) {
  v1::JobSpec full =
      Spec("restart", "full", absl::Hours(1), std::string("\0bin\xff", 5));
  (*full.mutable_labels())["k"] = "v";
  full.mutable_retry()->set_max_attempts(7);
  *full.mutable_retry()->mutable_lease() = ToProto(absl::Seconds(5));
  ASSERT_RPC_OK(client.Schedule(Request(full)));
  ASSERT_RPC_OK(client.Schedule(
      Request(SpecAt("restart", "at", absl::Now() + absl::Hours(48), "abs"))));
  ASSERT_RPC_OK(client.Schedule(
      Request(Spec("restart", "replaced", absl::Minutes(1), "v1"))));
  ASSERT_RPC_OK(client.Schedule(
      Request(Spec("restart", "replaced", absl::Minutes(2), "v2"),
              v1::IF_EXISTS_REPLACE)));
  ASSERT_RPC_OK(client.Schedule(Request(Spec("restart", "moved"))));
  v1::RescheduleRequest move;
  move.mutable_key()->set_topic("restart");
  move.mutable_key()->set_id("moved");
  *move.mutable_delay() = ToProto(absl::Hours(3));
  ASSERT_RPC_OK(client.Reschedule(move));
  ASSERT_RPC_OK(client.Schedule(Request(Spec("restart", "canceled"))));
  ASSERT_RPC_OK(client.Cancel("restart", "canceled"));
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 100; ++i) {
    *batch.add_requests() = Request(
        Spec("restart.batch", absl::StrFormat("b-%03d", i), absl::Hours(2)));
  }
  ASSERT_RPC_OK(client.ScheduleBatch(batch));
  for (const std::string topic : {"restart", "restart.batch"}) {
    v1::ListJobsRequest query;
    query.set_topic(topic);
    query.set_include_payload(true);
    for (v1::Job& job : client.ListAll(query)) {
      out.jobs[topic + "/" + job.id()] = std::move(job);
    }
  }
  ASSERT_EQ(out.jobs.size(), 104u);
}

void ExpectSameJobs(SchedulingClient& client, const Scheduled& before) {
  for (const auto& [name, job] : before.jobs) {
    auto got = client.GetJob(job.topic(), job.id());
    ASSERT_RPC_OK(got) << name;
    EXPECT_TRUE(MessageDifferencer::Equals(got.response, job))
        << got.response.DebugString() << "\nvs before\n"
        << job.DebugString();
  }
  EXPECT_EQ(client.GetJob("restart", "canceled").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client.StatsOf("restart").scheduled(), 4u);
  EXPECT_EQ(client.StatsOf("restart.batch").scheduled(), 100u);
  EXPECT_EQ(client.StatsOf("restart").due_next_day(), 3u);
  // A retry of a request made before the restart is still recognized.
  auto retry = client.Schedule(
      Request(Spec("restart", "replaced", absl::Minutes(2), "v2")));
  ASSERT_RPC_OK(retry);
  EXPECT_FALSE(retry.response.created());
}

TEST_F(SchedulingTest, JobsSurviveASigtermRestart) {
  Scheduled before;
  ASSERT_NO_FATAL_FAILURE(ScheduleMix(*client_, before));
  // A job that falls due while the server is down: READY after the restart.
  ASSERT_RPC_OK(client_->Schedule(
      Request(Spec("restart.soon", "soon", absl::Milliseconds(300)))));
  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, server_->Wait());
  EXPECT_EQ(code, 0) << server_->Log();
  absl::SleepFor(absl::Milliseconds(400));
  ASSERT_NO_FATAL_FAILURE(StartServer(dir));
  ASSERT_NO_FATAL_FAILURE(ExpectSameJobs(*client_, before));
  auto soon = client_->GetJob("restart.soon", "soon");
  ASSERT_RPC_OK(soon);
  EXPECT_EQ(soon.response.state(), v1::JOB_STATE_READY);
  WaitReady("restart.soon", 1);
}

TEST_F(SchedulingTest, JobsSurviveASigkillRestart) {
  Scheduled before;
  ASSERT_NO_FATAL_FAILURE(ScheduleMix(*client_, before));
  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGKILL);  // right after the last OK
  ASSERT_OK_AND_ASSIGN(int code, server_->Wait());
  EXPECT_EQ(code, 128 + SIGKILL);
  ASSERT_NO_FATAL_FAILURE(StartServer(dir));
  ASSERT_NO_FATAL_FAILURE(ExpectSameJobs(*client_, before));
  // And again, killed with nothing in between.
  server_->KeepDir();
  server_->Signal(SIGKILL);
  ASSERT_OK_AND_ASSIGN(code, server_->Wait());
  ASSERT_NO_FATAL_FAILURE(StartServer(dir));
  ASSERT_NO_FATAL_FAILURE(ExpectSameJobs(*client_, before));
}

}  // namespace
}  // namespace delayd::testing
