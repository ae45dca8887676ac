// End to end: ScheduleStream against the real binary over gRPC — each
// request answered in order with what its unary rpc answers (a duplicate
// id and an invalid job only in their own answers), whether each request
// has a message of its own or they share one, a client that writes far
// ahead of the answers, a message of too many requests, and OK answers
// surviving a SIGKILL.
#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <tuple>
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

v1::StreamRequest Streamed(v1::ScheduleRequest request) {
  v1::StreamRequest r;
  *r.mutable_schedule() = std::move(request);
  return r;
}

class ScheduleStreamTest : public SchedulingTest {
 protected:
  // Writes `requests` in messages of `per_message` (from a thread of its
  // own, so that the server's reading ahead is what paces it),
  // half-closes, and reads every answer.
  std::vector<v1::StreamAnswer> RunStream(
      const std::vector<v1::StreamRequest>& requests, size_t per_message,
      grpc::Status* status) {
    auto stub = v1::DelayQueue::NewStub(server_->NewChannel());
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(60));
    auto stream = stub->ScheduleStream(&context);
    std::thread writer([&] {
      for (size_t i = 0; i < requests.size(); i += per_message) {
        v1::ScheduleStreamRequest message;
        for (size_t j = i; j < requests.size() && j < i + per_message; ++j) {
          *message.add_requests() = requests[j];
        }
        if (!stream->Write(message)) break;
      }
      stream->WritesDone();
    });
    std::vector<v1::StreamAnswer> answers;
    v1::ScheduleStreamResponse message;
    while (stream->Read(&message)) {
      for (v1::StreamAnswer& a : *message.mutable_answers()) {
        answers.push_back(std::move(a));
      }
    }
    writer.join();
    *status = stream->Finish();
    return answers;
  }

  void ExpectFarAheadAnswered();
};

// Requests per message, and the server's --sync.
class EachRequestTest
    : public ScheduleStreamTest,
      public ::testing::WithParamInterface<std::tuple<size_t, std::string>> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_,
                         DelaydProcess::Start({"--sync=" + sync()}, ""));
    client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
  }
  size_t per_message() const { return std::get<0>(GetParam()); }
  std::string sync() const { return std::get<1>(GetParam()); }
};

// Requests one per message, and all in one message (the answers then come
// in one message too): the same answers. Under --sync=always a worker runs
// each batch; under --sync=none the polling thread runs its requests and
// gathers their writes, and hands a worker the rest of a batch from the
// first request whose job is locked (here the second request on "a", and
// the Cancel of "b", whose writes are still gathered when all six come in
// one message).
INSTANTIATE_TEST_SUITE_P(PerMessage, EachRequestTest,
                         ::testing::Combine(::testing::Values(1, 6),
                                            ::testing::Values("always",
                                                              "none")));

TEST_P(EachRequestTest, EachRequestGetsItsOwnAnswerInOrder) {
  const v1::ScheduleRequest invalid =
      Request(Spec("orders close", "x", absl::Minutes(5)));
  std::vector<v1::StreamRequest> requests = {
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
  const std::vector<v1::StreamAnswer> answers =
      RunStream(requests, per_message(), &status);
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
// at most 1024 of them, and answers every one, in order: under --sync=none
// too, where the polling thread runs the batches one after the other as
// their gathered writes are answered.
TEST_F(ScheduleStreamTest, AClientFarAheadOfTheAnswersGetsThemAllInOrder) {
  {
    SCOPED_TRACE("--sync=always");
    ExpectFarAheadAnswered();
  }
  SCOPED_TRACE("--sync=none");
  ASSERT_OK_AND_ASSIGN(server_, DelaydProcess::Start({"--sync=none"}, ""));
  client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
  ExpectFarAheadAnswered();
}

void ScheduleStreamTest::ExpectFarAheadAnswered() {
  constexpr int kJobs = 5000;
  std::vector<v1::StreamRequest> requests;
  for (int i = 0; i < kJobs; ++i) {
    requests.push_back(Streamed(
        Request(Spec("ahead", absl::StrCat("j", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  const std::vector<v1::StreamAnswer> answers = RunStream(requests, 1, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_EQ(answers[i].code(), 0) << i << ": " << answers[i].message();
    ASSERT_EQ(answers[i].schedule().job().id(), absl::StrCat("j", i));
  }
  EXPECT_EQ(client_->StatsOf("ahead").scheduled(),
            static_cast<uint64_t>(kJobs));
}

// Messages of 1000 requests (the most a message may hold) from a client
// far ahead: every answer, in order. One of 1001 then ends the stream with
// INVALID_ARGUMENT naming the limit, after the requests before it are
// answered, and none of its own is applied.
TEST_F(ScheduleStreamTest, AMessageOfTooManyRequestsEndsTheStream) {
  std::vector<v1::StreamRequest> requests;
  for (int i = 0; i < 3001; ++i) {
    requests.push_back(Streamed(
        Request(Spec("many", absl::StrCat("m", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  std::vector<v1::StreamAnswer> answers =
      RunStream({requests.begin(), requests.begin() + 3000}, 1000, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 3000u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(answers[i].code(), 0) << i << ": " << answers[i].message();
    ASSERT_EQ(answers[i].schedule().job().id(), absl::StrCat("m", i));
  }

  std::vector<v1::StreamRequest> more;
  for (int i = 0; i < 1001; ++i) {
    more.push_back(Streamed(
        Request(Spec("more", absl::StrCat("x", i), absl::Minutes(5)))));
  }
  // A first message of 2, then one of 1001.
  more.insert(more.begin(),
              Streamed(Request(Spec("more", "first", absl::Minutes(5)))));
  more.insert(more.begin(),
              Streamed(Request(Spec("more", "zero", absl::Minutes(5)))));
  auto stub = v1::DelayQueue::NewStub(server_->NewChannel());
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(60));
  auto stream = stub->ScheduleStream(&context);
  v1::ScheduleStreamRequest first;
  *first.add_requests() = more[0];
  *first.add_requests() = more[1];
  ASSERT_TRUE(stream->Write(first));
  v1::ScheduleStreamRequest too_many;
  for (size_t i = 2; i < more.size(); ++i) *too_many.add_requests() = more[i];
  (void)stream->Write(too_many);  // may fail once the server has ended it
  stream->WritesDone();
  size_t answered = 0;
  v1::ScheduleStreamResponse message;
  while (stream->Read(&message)) {
    for (const v1::StreamAnswer& a : message.answers()) {
      EXPECT_EQ(a.code(), 0) << a.message();
      ++answered;
    }
  }
  status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "requests: at most 1000 per message, got 1001");
  EXPECT_EQ(answered, 2u);
  EXPECT_EQ(ListIds("more"), (std::vector<std::string>{"first", "zero"}));
}

// The limit of a message is the proto's 1000, not --max-batch: a server
// with --max-batch=10 runs a message of 1000 in batches, and answers all.
TEST_F(ScheduleStreamTest, AMessageOverMaxBatchRunsInSeveralBatches) {
  ASSERT_OK_AND_ASSIGN(server_, DelaydProcess::Start({"--max-batch=10"}, ""));
  client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
  std::vector<v1::StreamRequest> requests;
  for (int i = 0; i < 1000; ++i) {
    requests.push_back(Streamed(
        Request(Spec("small", absl::StrCat("b", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  const std::vector<v1::StreamAnswer> answers =
      RunStream(requests, 1000, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(answers[i].code(), 0) << i << ": " << answers[i].message();
    ASSERT_EQ(answers[i].schedule().job().id(), absl::StrCat("b", i));
  }
  EXPECT_EQ(client_->StatsOf("small").scheduled(), 1000u);
}

// Every OK a stream answered is durable: the jobs are there after kill -9
// right after the last answer.
TEST_F(ScheduleStreamTest, OkAnswersSurviveASigkill) {
  constexpr int kJobs = 300;
  std::vector<v1::StreamRequest> requests;
  for (int i = 0; i < kJobs; ++i) {
    requests.push_back(Streamed(
        Request(Spec("durable", absl::StrCat("d", i), absl::Minutes(5)))));
  }
  grpc::Status status;
  const std::vector<v1::StreamAnswer> answers = RunStream(requests, 7, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kJobs));
  for (const v1::StreamAnswer& a : answers) {
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
