// End to end: --retention on the real binary. An acked job reads DONE, Cancel
// answers ALREADY_DONE, and once the retention has passed (never before, by
// the wall clock both share) it is NOT_FOUND; a canceled job is kept as
// CANCELED, then swept; retained jobs survive a kill -9 restart and are swept
// after it; the flag is documented, read from a config file, and refused out
// of range. Without the flag nothing is kept (the rest of the suite).
#include <signal.h>
#include <stdio.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/delivery_client.h"
#include "tests/e2e/scheduling_client.h"
#include "tests/e2e/scheduling_fixture.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

using ::testing::HasSubstr;

class RetentionE2eTest : public ::testing::Test {
 protected:
  // Starts delayd with `retention` on `dir` (a new temp dir when empty).
  void StartServer(absl::Duration retention, const std::string& dir = "") {
    ASSERT_OK_AND_ASSIGN(
        server_,
        DelaydProcess::Start(
            {absl::StrCat("--retention=", absl::FormatDuration(retention))},
            dir));
    client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
    delivery_ = std::make_unique<DeliveryClient>(server_->NewChannel());
  }

  // Schedules (topic, id) due now, receives it on a new subscriber, acks it
  // and returns the job as GetJob shows it right after.
  v1::Job DeliverAndAck(const std::string& topic, const std::string& id) {
    auto sub = std::make_unique<TestSubscriber>(server_->NewChannel(), topic,
                                                /*max_in_flight=*/10);
    auto scheduled =
        client_->Schedule(Request(Spec(topic, id, absl::ZeroDuration(), "p")));
    EXPECT_RPC_OK(scheduled);
    EXPECT_TRUE(sub->WaitFor(1));
    if (sub->count() == 0) return v1::Job();
    EXPECT_EQ(delivery_->AckCode(sub->at(0).delivery.ack_token()),
              grpc::StatusCode::OK);
    auto job = client_->GetJob(topic, id);
    EXPECT_RPC_OK(job);
    return job.response;
  }

  // Waits (generously) until GetJob answers NOT_FOUND; returns the wall
  // time it first did.
  absl::Time WaitGone(const std::string& topic, const std::string& id,
                      absl::Duration retention) {
    absl::Time gone = absl::InfiniteFuture();
    EXPECT_TRUE(Eventually(
        [&] {
          if (client_->GetJob(topic, id).status.error_code() !=
              grpc::StatusCode::NOT_FOUND) {
            return false;
          }
          gone = absl::Now();
          return true;
        },
        retention + absl::Seconds(30)))
        << topic << "/" << id << " was never swept";
    return gone;
  }

  std::unique_ptr<DelaydProcess> server_;
  std::unique_ptr<SchedulingClient> client_;
  std::unique_ptr<DeliveryClient> delivery_;
};

TEST_F(RetentionE2eTest, AckedJobIsDoneAlreadyDoneForCancelThenNotFound) {
  const absl::Duration kRetention = absl::Seconds(2);
  ASSERT_NO_FATAL_FAILURE(StartServer(kRetention));
  const v1::Job job = DeliverAndAck("orders.close", "order-1");
  ASSERT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.attempts(), 1u);
  const absl::Time finished = FromProto(job.updated_at());

  auto cancel = client_->Cancel("orders.close", "order-1");
  ASSERT_RPC_OK(cancel);
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_ALREADY_DONE);
  EXPECT_EQ(cancel.response.job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(cancel.response.job().id(), "order-1");
  const v1::TopicStats stats = client_->StatsOf("orders.close");
  EXPECT_EQ(stats.done(), 1u) << stats.DebugString();
  EXPECT_EQ(stats.in_flight(), 0u);
  v1::ListJobsRequest done_query;
  done_query.set_topic("orders.close");
  done_query.add_states(v1::JOB_STATE_DONE);
  EXPECT_EQ(IdsOf(client_->ListAll(done_query)),
            std::vector<std::string>{"order-1"});
  // The client's retry of the original Schedule: the DONE job, not a rerun.
  auto retry = client_->Schedule(
      Request(Spec("orders.close", "order-1", absl::ZeroDuration(), "p")));
  ASSERT_RPC_OK(retry);
  EXPECT_FALSE(retry.response.created());
  EXPECT_EQ(retry.response.job().state(), v1::JOB_STATE_DONE);

  const absl::Time gone = WaitGone("orders.close", "order-1", kRetention);
  EXPECT_GE(gone, finished + kRetention) << "swept before the retention ended";
  cancel = client_->Cancel("orders.close", "order-1");
  ASSERT_RPC_OK(cancel);
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_EQ(client_->StatsOf("orders.close").done(), 0u);
}

TEST_F(RetentionE2eTest, CanceledJobIsKeptAsCanceledThenSwept) {
  const absl::Duration kRetention = absl::Seconds(2);
  ASSERT_NO_FATAL_FAILURE(StartServer(kRetention));
  ASSERT_RPC_OK(client_->Schedule(Request(Spec("t", "c", absl::Hours(1)))));
  auto cancel = client_->Cancel("t", "c");
  ASSERT_RPC_OK(cancel);
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  const absl::Time finished = FromProto(cancel.response.job().updated_at());

  auto job = client_->GetJob("t", "c");
  ASSERT_RPC_OK(job);
  EXPECT_EQ(job.response.state(), v1::JOB_STATE_CANCELED);
  cancel = client_->Cancel("t", "c");
  ASSERT_RPC_OK(cancel);
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  v1::RescheduleRequest move;
  move.mutable_key()->set_topic("t");
  move.mutable_key()->set_id("c");
  *move.mutable_delay() = ToProto(absl::Seconds(1));
  auto moved = client_->Reschedule(move);
  EXPECT_EQ(moved.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(moved.status.error_message(), HasSubstr("JOB_STATE_CANCELED"));
  const v1::TopicStats stats = client_->StatsOf("t");
  EXPECT_EQ(stats.canceled(), 1u) << stats.DebugString();
  EXPECT_EQ(stats.scheduled(), 0u);

  const absl::Time gone = WaitGone("t", "c", kRetention);
  EXPECT_GE(gone, finished + kRetention) << "swept before the retention ended";
  // The sweeper deletes, then uncounts.
  EXPECT_TRUE(Eventually([&] { return client_->StatsOf("t").canceled() == 0; }))
      << client_->StatsOf("t").DebugString();
  // The id is free again.
  auto again = client_->Schedule(Request(Spec("t", "c", absl::Hours(1))));
  ASSERT_RPC_OK(again);
  EXPECT_TRUE(again.response.created());
}

TEST_F(RetentionE2eTest, RetainedJobsSurviveAKillAndAreSweptAfterTheRestart) {
  // Long enough to outlast a restart on a busy machine.
  const absl::Duration kRetention = absl::Seconds(10);
  ASSERT_NO_FATAL_FAILURE(StartServer(kRetention));
  const v1::Job done = DeliverAndAck("t", "done");
  ASSERT_EQ(done.state(), v1::JOB_STATE_DONE);
  ASSERT_RPC_OK(client_->Schedule(Request(Spec("t", "canceled"))));
  ASSERT_RPC_OK(client_->Cancel("t", "canceled"));
  ASSERT_RPC_OK(client_->Schedule(Request(Spec("t", "live"))));

  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGKILL);
  ASSERT_OK(server_->Wait());
  ASSERT_NO_FATAL_FAILURE(StartServer(kRetention, dir));

  auto got = client_->GetJob("t", "done");
  ASSERT_RPC_OK(got);
  EXPECT_EQ(got.response.state(), v1::JOB_STATE_DONE);
  got = client_->GetJob("t", "canceled");
  ASSERT_RPC_OK(got);
  EXPECT_EQ(got.response.state(), v1::JOB_STATE_CANCELED);
  auto cancel = client_->Cancel("t", "done");
  ASSERT_RPC_OK(cancel);
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_ALREADY_DONE);
  // Counted again by the background scan; only the live job is scheduled.
  EXPECT_TRUE(Eventually([&] {
    const v1::TopicStats s = client_->StatsOf("t");
    return s.done() == 1 && s.canceled() == 1;
  })) << client_->StatsOf("t").DebugString();
  EXPECT_EQ(client_->StatsOf("t").scheduled(), 1u);
  EXPECT_LT(absl::Now(), FromProto(done.updated_at()) + kRetention)
      << "the checks above ran after the retention ended; they prove nothing";

  EXPECT_GE(WaitGone("t", "done", kRetention),
            FromProto(done.updated_at()) + kRetention);
  WaitGone("t", "canceled", kRetention);
  auto live = client_->GetJob("t", "live");
  ASSERT_RPC_OK(live);
  EXPECT_EQ(live.response.state(), v1::JOB_STATE_SCHEDULED);
  // The sweeper deletes, then uncounts.
  EXPECT_TRUE(Eventually([&] {
    const v1::TopicStats s = client_->StatsOf("t");
    return s.done() == 0 && s.canceled() == 0;
  })) << client_->StatsOf("t").DebugString();
}

TEST_F(RetentionE2eTest, OutOfRangeValuesAreRefusedNamingTheFlagAndTheLimit) {
  for (const char* value : {"--retention=8761h", "--retention=-1s"}) {
    auto server = DelaydProcess::Start({value});
    ASSERT_FALSE(server.ok()) << value;
    EXPECT_THAT(std::string(server.status().message()),
                HasSubstr("--retention: must be between 0 (off) and 8760h"))
        << server.status();
  }
}

TEST_F(RetentionE2eTest, IsReadFromTheConfigFile) {
  const std::string dir = MakeTempDir();
  {
    std::FILE* f = std::fopen((dir + "/delayd.conf").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("retention = 3s\n", f);
    std::fclose(f);
  }
  ASSERT_OK_AND_ASSIGN(
      server_, DelaydProcess::Start({"--config=" + dir + "/delayd.conf"}, dir));
  client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
  delivery_ = std::make_unique<DeliveryClient>(server_->NewChannel());
  EXPECT_EQ(DeliverAndAck("t", "a").state(), v1::JOB_STATE_DONE);
}

TEST_F(RetentionE2eTest, HelpDocumentsTheFlag) {
  FILE* help = popen((DelaydBinary() + " --help 2>&1").c_str(), "r");
  ASSERT_NE(help, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), help)) > 0;)
    out.append(buf, n);
  pclose(help);
  EXPECT_THAT(out, HasSubstr("--retention=DURATION (default: 0; range: between "
                             "0 (off) and 8760h)\n      how long acked jobs"));
}

}  // namespace
}  // namespace delayd::testing
