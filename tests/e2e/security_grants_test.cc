// End-to-end: principals and their grants against the real binary over
// TLS — tokens reach only their topics, wrong or missing tokens are
// UNAUTHENTICATED, nothing of other topics leaks (GetStats, ListJobs, Ack,
// Nack, Subscribe), the JSON API follows the same grants, quotas refuse the
// excess and survive kill -9, SIGHUP re-reads the auth file, and refusals
// reach the audit log.
#include <signal.h>

#include <string>
#include <vector>

#include "tests/e2e/security_fixture.h"

namespace delayd::testing::security {
namespace {

TEST_F(SecurityTest, TokensReachOnlyTheirGrants) {
  StartServer();
  auto stub = TlsStub();
  EXPECT_TRUE(Schedule(*stub, kOrdersToken, Job("orders.close", "o1")).ok());

  const grpc::Status denied =
      Schedule(*stub, kOrdersToken, Job("billing.x", "b1"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(denied.error_message().find("schedule"), std::string::npos)
      << denied.error_message();
  EXPECT_NE(denied.error_message().find("billing.x"), std::string::npos)
      << denied.error_message();
  // Nothing was stored: ops (admin everywhere) finds no such job.
  EXPECT_EQ(GetJob(*stub, kOpsToken, "billing.x", "b1").error_code(),
            grpc::StatusCode::NOT_FOUND);
  // A batch with one topic outside the grants is refused whole.
  {
    grpc::ClientContext context;
    Authorize(context, kOrdersToken);
    v1::ScheduleBatchRequest request;
    *request.add_requests()->mutable_job() = Job("orders.close", "o2");
    *request.add_requests()->mutable_job() = Job("billing.x", "b2");
    v1::ScheduleBatchResponse response;
    EXPECT_EQ(stub->ScheduleBatch(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(GetJob(*stub, kOpsToken, "orders.close", "o2").error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // Reads and cancels follow the grants too.
  EXPECT_TRUE(GetJob(*stub, kOrdersToken, "orders.close", "o1").ok());
  EXPECT_EQ(GetJob(*stub, kBillingToken, "orders.close", "o1").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    grpc::ClientContext context;
    Authorize(context, kBillingToken);
    v1::CancelRequest request;
    request.mutable_key()->set_topic("orders.close");
    request.mutable_key()->set_id("o1");
    v1::CancelResponse response;
    EXPECT_EQ(stub->Cancel(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_TRUE(GetJob(*stub, kOrdersToken, "orders.close", "o1").ok());
  }
  // Admin rpcs need admin.
  {
    grpc::ClientContext context;
    Authorize(context, kOrdersToken);
    v1::CancelByPrefixRequest request;
    request.set_topic("orders.close");
    v1::CancelByPrefixResponse response;
    EXPECT_EQ(stub->CancelByPrefix(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // The refusals are in the audit log, with principal, method and topic.
  const std::string log = server_->Log();
  EXPECT_NE(log.find("audit principal=\"orders\" method=Schedule "
                     "topic=\"billing.x\" outcome=PERMISSION_DENIED"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("audit principal=\"orders\" method=CancelByPrefix "
                     "topic=\"orders.close\" outcome=PERMISSION_DENIED"),
            std::string::npos)
      << log;
}

TEST_F(SecurityTest, WrongOrMissingTokenIsUnauthenticated) {
  StartServer();
  auto stub = TlsStub();
  for (const std::string token : {"not-a-token", "", "orders-secret-tokeN"}) {
    const grpc::Status status =
        Schedule(*stub, token, Job("orders.close", "x"));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << "token '" << token << "': " << status.error_message();
  }
  {  // A token given under another scheme is not a bearer token.
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Basic ") + kOrdersToken);
    SetDeadline(context, absl::Seconds(10));
    v1::GetStatsRequest request;
    v1::GetStatsResponse response;
    EXPECT_EQ(stub->GetStats(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {  // Subscribe too.
    Stream stream(*stub, "wrong", "orders.close");
    EXPECT_FALSE(stream.Next().has_value());
    EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(GetJob(*stub, kOpsToken, "orders.close", "x").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(server_->Log().find("outcome=UNAUTHENTICATED"), std::string::npos);
}

TEST_F(SecurityTest, OtherTopicsDoNotLeak) {
  StartServer();
  auto stub = TlsStub();
  ASSERT_TRUE(Schedule(*stub, kOrdersToken, Job("orders.close", "o1")).ok());
  ASSERT_TRUE(Schedule(*stub, kBillingToken, Job("billing.x", "b1")).ok());
  ASSERT_TRUE(Schedule(*stub, kBillingToken,
                       Job("billing.now", "due", absl::ZeroDuration()))
                  .ok());

  auto stats = [&](const std::string& token) {
    grpc::ClientContext context;
    Authorize(context, token);
    v1::GetStatsRequest request;
    request.set_due_soon(true);
    v1::GetStatsResponse response;
    EXPECT_TRUE(stub->GetStats(&context, request, &response).ok());
    std::vector<std::string> topics;
    for (const v1::TopicStats& t : response.topics()) {
      topics.push_back(t.topic());
    }
    return std::make_pair(topics, response);
  };
  {
    auto [topics, response] = stats(kOrdersToken);
    EXPECT_EQ(topics, std::vector<std::string>{"orders.close"});
    EXPECT_FALSE(response.has_due_soon());
    EXPECT_EQ(response.fire_lateness_size(), 0);
  }
  {
    auto [topics, response] = stats(kOpsToken);
    EXPECT_EQ(topics, (std::vector<std::string>{"billing.now", "billing.x",
                                                "orders.close"}));
    EXPECT_TRUE(response.has_due_soon());
  }
  // ListJobs (of one topic): another topic is refused; its own answers.
  auto list = [&](const std::string& token, const std::string& topic) {
    grpc::ClientContext context;
    Authorize(context, token);
    v1::ListJobsRequest request;
    request.set_topic(topic);
    v1::ListJobsResponse response;
    grpc::Status status = stub->ListJobs(&context, request, &response);
    return std::make_pair(status, response);
  };
  EXPECT_EQ(list(kOrdersToken, "billing.x").first.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    auto [status, response] = list(kOrdersToken, "orders.close");
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.jobs_size(), 1);
    EXPECT_EQ(response.jobs(0).id(), "o1");
  }
  {
    auto [status, response] = list(kOpsToken, "billing.x");
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.jobs_size(), 1);
  }

  // Consuming: orders cannot subscribe to billing's topic, nor ack its
  // delivery; billing can.
  {
    Stream foreign(*stub, kOrdersToken, "billing.now");
    EXPECT_FALSE(foreign.Next().has_value());
    EXPECT_EQ(foreign.Finish().error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  Stream stream(*stub, kBillingToken, "billing.now");
  std::optional<v1::Delivery> delivery = stream.Next();
  ASSERT_TRUE(delivery.has_value());
  auto ack = [&](const std::string& token) {
    grpc::ClientContext context;
    Authorize(context, token);
    v1::AckRequest request;
    request.add_ack_tokens(delivery->ack_token());
    v1::AckResponse response;
    grpc::Status status = stub->Ack(&context, request, &response);
    return std::make_pair(status, response);
  };
  {
    auto [status, response] = ack(kOrdersToken);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(status.error_message().find("consume"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    Authorize(context, kOrdersToken);
    v1::NackRequest request;
    request.set_ack_token(delivery->ack_token());
    v1::NackResponse response;
    EXPECT_EQ(stub->Nack(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    auto [status, response] = ack(kBillingToken);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.results_size(), 1);
    EXPECT_EQ(response.results(0).code(), 0) << response.results(0).message();
  }
}

// The JSON API on the HTTP port follows the same principals and grants.
TEST_F(SecurityTest, TheHttpApiFollowsTheGrants) {
  StartServer();
  auto stub = TlsStub();
  ASSERT_TRUE(Schedule(*stub, kOrdersToken, Job("orders.close", "o1")).ok());
  ASSERT_TRUE(Schedule(*stub, kBillingToken, Job("billing.x", "b1")).ok());
  auto http = [&](const std::string& method, const std::string& path,
                  const std::string& token, const std::string& body = "") {
    std::string request =
        absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: localhost\r\n");
    if (!token.empty()) {
      absl::StrAppend(&request, "Authorization: Bearer ", token, "\r\n");
    }
    absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n\r\n",
                    body);
    return HttpExchange(server_->http_address(), request);
  };
  auto status_line = [](const std::string& response) {
    return response.substr(0, response.find('\r'));
  };
  EXPECT_EQ(status_line(http("GET", "/api/v1/stats", "")),
            "HTTP/1.0 401 Unauthorized");
  EXPECT_EQ(status_line(http("GET", "/api/v1/stats", "wrong")),
            "HTTP/1.0 401 Unauthorized");
  const std::string stats = http("GET", "/api/v1/stats", kOrdersToken);
  EXPECT_EQ(status_line(stats), "HTTP/1.0 200 OK");
  EXPECT_NE(stats.find("orders.close"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("billing"), std::string::npos) << stats;
  EXPECT_EQ(status_line(
                http("GET", "/api/v1/topics/billing.x/jobs/b1", kOrdersToken)),
            "HTTP/1.0 403 Forbidden");
  EXPECT_EQ(status_line(http("POST", "/api/v1/jobs", kOrdersToken,
                             R"({"job": {"topic": "billing.x", "id": "h1"}})")),
            "HTTP/1.0 403 Forbidden");
  EXPECT_EQ(GetJob(*stub, kOpsToken, "billing.x", "h1").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status_line(http("GET", "/api/v1/topics/orders.close/jobs/o1",
                             kOrdersToken)),
            "HTTP/1.0 200 OK");
}

TEST_F(SecurityTest, QuotasRefuseTheExcessAndSurviveARestart) {
  StartServer();
  auto stub = TlsStub();
  auto batch = [&](std::vector<std::string> ids) {
    grpc::ClientContext context;
    Authorize(context, kQuotaToken);
    v1::ScheduleBatchRequest request;
    for (const std::string& id : ids) {
      *request.add_requests()->mutable_job() = Job("quota.a", id);
    }
    v1::ScheduleBatchResponse response;
    return stub->ScheduleBatch(&context, request, &response);
  };
  {
    const grpc::Status first = batch({"1", "2"});
    ASSERT_TRUE(first.ok()) << first.error_message();
  }
  // Two more would make 4 of 3: the batch is refused whole.
  const grpc::Status refused = batch({"3", "4"});
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("quota pending quota.*"),
            std::string::npos)
      << refused.error_message();
  EXPECT_EQ(GetJob(*stub, kOpsToken, "quota.a", "3").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetJob(*stub, kOpsToken, "quota.a", "4").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Schedule(*stub, kQuotaToken, Job("quota.b", "3")).ok());
  EXPECT_EQ(Schedule(*stub, kQuotaToken, Job("quota.b", "4")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Other principals' topics are not theirs to count.
  EXPECT_TRUE(Schedule(*stub, kOrdersToken, Job("orders.close", "q")).ok());

  {  // One Subscribe stream at a time.
    Stream first(*stub, kQuotaToken, "quota.s");
    absl::SleepFor(absl::Milliseconds(200));  // the stream is open
    Stream second(*stub, kQuotaToken, "quota.s");
    EXPECT_FALSE(second.Next().has_value());
    EXPECT_EQ(second.Finish().error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  const std::string metrics = ScrapeMetrics(server_->http_address());
  EXPECT_NE(metrics.find("delayd_quota_refusals_total{principal=\"quota\","
                         "quota=\"pending\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(server_->Log().find("audit principal=\"quota\" "
                                "method=ScheduleBatch topic=\"quota.a\" "
                                "outcome=RESOURCE_EXHAUSTED"),
            std::string::npos)
      << server_->Log();

  // After kill -9 the pending jobs are counted again from the store.
  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGKILL);
  ASSERT_TRUE(server_->Wait().ok());
  server_.reset();
  StartServer({}, dir);
  stub = TlsStub();
  EXPECT_EQ(Schedule(*stub, kQuotaToken, Job("quota.c", "5")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(GetJob(*stub, kOpsToken, "quota.c", "5").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// pending_bytes counts the payload bytes of the live jobs: a call past it
// is refused and stores nothing; a canceled job gives its bytes back; after
// kill -9 the bytes are counted again from the store.
TEST_F(SecurityTest, APendingBytesQuotaRefusesTheExcessAndSurvivesARestart) {
  StartServer();
  auto stub = TlsStub();
  const auto job = [](const std::string& id, size_t bytes) {
    v1::JobSpec spec = Job("bytes.a", id);
    spec.set_payload(std::string(bytes, 'b'));
    return spec;
  };
  ASSERT_TRUE(Schedule(*stub, kBytesToken, job("1", 400)).ok());
  ASSERT_TRUE(Schedule(*stub, kBytesToken, job("2", 500)).ok());
  const grpc::Status refused = Schedule(*stub, kBytesToken, job("3", 101));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "quota pending_bytes bytes.* of principal 'bytes': 900 bytes of "
            "payload pending there, and this call adds 101; the limit is "
            "1000");
  EXPECT_EQ(GetJob(*stub, kOpsToken, "bytes.a", "3").error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Schedule(*stub, kBytesToken, job("3", 100)).ok());  // 1000
  EXPECT_EQ(Schedule(*stub, kBytesToken, job("4", 1)).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  {  // Canceled, job 2 gives its 500 bytes back.
    grpc::ClientContext context;
    Authorize(context, kBytesToken);
    v1::CancelRequest request;
    request.mutable_key()->set_topic("bytes.a");
    request.mutable_key()->set_id("2");
    v1::CancelResponse response;
    ASSERT_TRUE(stub->Cancel(&context, request, &response).ok());
    EXPECT_EQ(response.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  }
  ASSERT_TRUE(Schedule(*stub, kBytesToken, job("4", 499)).ok());  // 999
  const std::string metrics = ScrapeMetrics(server_->http_address());
  EXPECT_NE(metrics.find("delayd_quota_refusals_total{principal=\"bytes\","
                         "quota=\"pending_bytes\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("delayd_principal_payload_bytes_admitted_total{"
                         "principal=\"bytes\"} 1499"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("delayd_pending_payload_bytes{topic=\"bytes.a\"} 999"),
            std::string::npos)
      << metrics;

  // After kill -9 the 999 bytes pending are counted again from the store.
  server_->KeepDir();
  const std::string dir = server_->dir();
  server_->Signal(SIGKILL);
  ASSERT_TRUE(server_->Wait().ok());
  server_.reset();
  StartServer({}, dir);
  stub = TlsStub();
  EXPECT_EQ(Schedule(*stub, kBytesToken, job("5", 2)).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(GetJob(*stub, kOpsToken, "bytes.a", "5").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Schedule(*stub, kBytesToken, job("5", 1)).ok());
}

// ScheduleStream checks each request as its unary rpc does: a topic outside
// the grants and a quota refuse only their own request; an unknown token
// refuses the stream.
TEST_F(SecurityTest, AScheduleStreamChecksEachRequest) {
  StartServer();
  auto stub = TlsStub();
  const auto run = [&](const std::string& token,
                       const std::vector<v1::JobSpec>& jobs,
                       grpc::Status* status) {
    grpc::ClientContext context;
    Authorize(context, token);
    auto stream = stub->ScheduleStream(&context);
    // All in one message: each is still checked on its own.
    v1::ScheduleStreamRequest message;
    for (const v1::JobSpec& job : jobs) {
      *message.add_requests()->mutable_schedule()->mutable_job() = job;
    }
    (void)stream->Write(message);
    stream->WritesDone();
    std::vector<v1::StreamAnswer> answers;
    v1::ScheduleStreamResponse answer;
    while (stream->Read(&answer)) {
      answers.insert(answers.end(), answer.answers().begin(),
                     answer.answers().end());
    }
    *status = stream->Finish();
    return answers;
  };
  grpc::Status status;
  std::vector<v1::StreamAnswer> answers =
      run(kOrdersToken,
          {Job("orders.close", "s1"), Job("billing.x", "s2"),
           Job("orders.close", "s3")},
          &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].code(), 0) << answers[0].message();
  EXPECT_EQ(answers[1].code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(answers[1].message().find("billing.x"), std::string::npos)
      << answers[1].message();
  EXPECT_EQ(answers[2].code(), 0) << answers[2].message();
  EXPECT_EQ(GetJob(*stub, kOpsToken, "billing.x", "s2").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(server_->Log().find("audit principal=\"orders\" "
                                "method=ScheduleStream topic=\"billing.x\" "
                                "outcome=PERMISSION_DENIED"),
            std::string::npos)
      << server_->Log();

  v1::JobSpec big = Job("bytes.a", "b1");
  big.set_payload(std::string(1001, 'b'));  // over pending_bytes 1000
  answers = run(kBytesToken, {big, Job("bytes.a", "b2")}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(answers[1].code(), 0) << answers[1].message();
  EXPECT_EQ(GetJob(*stub, kOpsToken, "bytes.a", "b1").error_code(),
            grpc::StatusCode::NOT_FOUND);

  answers = run("not-a-token", {Job("orders.close", "s4")}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(answers.empty());
  EXPECT_EQ(GetJob(*stub, kOpsToken, "orders.close", "s4").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(SecurityTest, SighupReadsTheAuthFileAgain) {
  StartServer();
  auto stub = TlsStub();
  EXPECT_EQ(GetJob(*stub, kLateToken, "late.x", "1").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A file that does not parse is refused; the one in use stays.
  WriteAll(auth_file_, "principal broken\n  grant fly *\n");
  server_->Signal(SIGHUP);
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
       server_->Log().find("keeping the auth file in use") ==
           std::string::npos &&
       absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_NE(server_->Log().find("keeping the auth file in use"),
            std::string::npos);
  EXPECT_EQ(GetJob(*stub, kOrdersToken, "orders.close", "1").error_code(),
            grpc::StatusCode::NOT_FOUND);

  WriteAll(auth_file_, AuthFile(/*with_late_comer=*/true));
  server_->Signal(SIGHUP);
  grpc::StatusCode code = grpc::StatusCode::UNAUTHENTICATED;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
       code == grpc::StatusCode::UNAUTHENTICATED && absl::Now() < deadline;) {
    code = GetJob(*stub, kLateToken, "late.x", "1").error_code();
    if (code == grpc::StatusCode::UNAUTHENTICATED) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetJob(*stub, kLateToken, "orders.close", "1").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace delayd::testing::security
