// End to end: ScheduleStream against the real binary over gRPC — each
// request answered in order with what its unary rpc answers (a duplicate
// id and an invalid job only in their own answers), a client that writes
// far ahead of the answers, and OK answers surviving a SIGKILL.
#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/scheduling_fixture.h"
#include "tests/support/rpc_deadline.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

v1::ScheduleStreamRequest Streamed(v1::ScheduleRequest request) {
  v1::ScheduleStreamRequest r;
  *r.mutable_schedule() = std::move(request);
  return r;
}

class ScheduleStreamTest : public SchedulingTest {
 protected:
  // Writes every request (from a thread of its own, so that the server's
  // reading ahead is what paces it), half-closes, and reads every answer.
  std::vector<v1::ScheduleStreamResponse> RunStream(
      const std::vector<v1::ScheduleStreamRequest>& requests,
      grpc::Status* status) {
    auto stub = v1::DelayQueue::NewStub(server_->NewChannel());
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(60));
    auto stream = stub->ScheduleStream(&context);
    std::thread writer([&] {
      for (const v1::ScheduleStreamRequest& r : requests) {
        if (!stream->Write(r)) break;
      }
      stream->WritesDone();
    });
    std::vector<v1::ScheduleStreamResponse> answers;
    v1::ScheduleStreamResponse answer;
    while (stream->Read(&answer)) answers.push_back(answer);
    writer.join();
    *status = stream->Finish();
    return answers;
  }
};

TEST_F(ScheduleStreamTest, EachRequestGetsItsOwnAnswerInOrder) {
  const v1::ScheduleRequest invalid =
      Request(Spec("orders close", "x", absl::Minutes(5)));
  std::vector<v1::ScheduleStreamRequest> requests = {
      Streamed(Request(Spec("orders", "a", absl::Minutes(5), "one"))),
      Streamed(Request(Spec("orders", "b", absl::Minutes(5)))),
      Streamed(Request(Spec("orders", "a", absl::Minutes(5), "two"))),
      Streamed(invalid),
      {},
      Streamed(Request(Spec("orders", "c", absl::Minutes(5)))),
  };
  requests[4].mutable_cancel()->mutable_key()->set_topic("orders");
  requests[4].mutable_cancel()->mutable_key()->set_id("b");
  grpc::Status status;
  const std::vector<v1::ScheduleStreamResponse> answers =
      RunStream(requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), requests.size());
  EXPECT_EQ(answers[0].code(), 0) << answers[0].message();
  EXPECT_EQ(answers[0].schedule().job().payload(), "one");
  EXPECT_TRUE(answers[0].schedule().created());
  EXPECT_EQ(answers[1].code(), 0) << answers[1].message();
  EXPECT_EQ(answers[2].code(), grpc::StatusCode::ALREADY_EXISTS);
  // The invalid job gets what the unary Schedule answers it.
  auto unary = client_->Schedule(invalid);
  EXPECT_EQ(unary.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[3].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[3].message(), unary.status.error_message());
  EXPECT_THAT(answers[3].message(), ::testing::StartsWith("job.topic: "));
  EXPECT_EQ(answers[4].code(), 0);
  EXPECT_EQ(answers[4].cancel().outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(answers[5].code(), 0);
  EXPECT_EQ(ListIds("orders"), (std::vector<std::string>{"a", "c"}));
  // a kept its first payload.
  auto job = client_->GetJob("orders", "a");
  ASSERT_RPC_OK(job);
  EXPECT_EQ(job.response.payload(), "one");
}

// The client writes 5,000 requests without waiting; the server reads ahead
// at most 1024 of them, and answers every one, in order.
TEST_F(ScheduleStreamTest, AClientFarAheadOfTheAnswersGetsThemAllInOrder) {
  constexpr int kJobs = 5000;
  std::vector<v1::ScheduleStreamRequest> requests;
  for (int i = 0; i < kJobs; ++i) {
    requests.push_back(Streamed(
        Request(Spec("ahead", absl::StrCat("j", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  const std::vector<v1::ScheduleStreamResponse> answers =
      RunStream(requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_EQ(answers[i].code(), 0) << i << ": " << answers[i].message();
    ASSERT_EQ(answers[i].schedule().job().id(), absl::StrCat("j", i));
  }
  EXPECT_EQ(client_->StatsOf("ahead").scheduled(),
            static_cast<uint64_t>(kJobs));
}

// Every OK a stream answered is durable: the jobs are there after kill -9
// right after the last answer.
TEST_F(ScheduleStreamTest, OkAnswersSurviveASigkill) {
  constexpr int kJobs = 300;
  std::vector<v1::ScheduleStreamRequest> requests;
  for (int i = 0; i < kJobs; ++i) {
    requests.push_back(Streamed(
        Request(Spec("durable", absl::StrCat("d", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  const std::vector<v1::ScheduleStreamResponse> answers =
      RunStream(requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kJobs));
  for (const v1::ScheduleStreamResponse& a : answers) {
    ASSERT_EQ(a.code(), 0) << a.message();
  }
  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGKILL);
  ASSERT_OK_AND_ASSIGN(int code, server_->Wait());
  EXPECT_EQ(code, 128 + SIGKILL);
  ASSERT_NO_FATAL_FAILURE(StartServer(dir));
  EXPECT_EQ(ListIds("durable").size(), static_cast<size_t>(kJobs));
}

}  // namespace
}  // namespace delayd::testing
