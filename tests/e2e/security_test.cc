// End-to-end tests of delayd's security (docs/security.md) against the real
// binary: TLS and mutual TLS on the gRPC port with certificates made here by
// the openssl tool, bearer tokens and grants from an auth file, the audit
// log, a certificate rotated on disk while a subscription streams, the auth
// file re-read on SIGHUP, and the refusal to serve a non-loopback address
// without TLS and auth.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/auth/auth_config.h"
#include "tests/support/rpc_deadline.h"
#include "tests/support/server_process.h"

namespace delayd::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Runs a shell command; fails the test when it fails.
void Run(const std::string& command) {
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// Certificates for the tests, made by openssl in `dir`: two CAs; a server
// certificate for localhost/127.0.0.1 from each; client certificates from
// CA 1 for the identity "orders-client" and for an unknown "stranger".
class Pki {
 public:
  explicit Pki(std::string dir) : dir_(std::move(dir)) {}

  void Make() {
    const std::string ec =
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (const char* ca : {"ca1", "ca2"}) {
      Run(absl::StrCat("cd ", dir_, " && openssl req -x509 ", ec,
                       " -days 2 -subj /CN=test-", ca, " -keyout ", ca,
                       ".key -out ", ca, ".pem 2>/dev/null"));
    }
    Leaf("server1", "ca1", "localhost", "DNS:localhost,IP:127.0.0.1");
    Leaf("server2", "ca2", "localhost", "DNS:localhost,IP:127.0.0.1");
    Leaf("orders", "ca1", "orders-client", "DNS:orders-client");
    Leaf("stranger", "ca1", "stranger", "DNS:stranger");
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }
  std::string Pem(const std::string& name) const { return ReadAll(Path(name)); }

 private:
  void Leaf(const std::string& name, const std::string& ca,
            const std::string& cn, const std::string& san) {
    WriteAll(Path(name + ".ext"), absl::StrCat("subjectAltName=", san, "\n"));
    Run(absl::StrCat("cd ", dir_,
                     " && openssl req -newkey ec -pkeyopt "
                     "ec_paramgen_curve:prime256v1 -nodes -subj /CN=",
                     cn, " -keyout ", name, ".key -out ", name,
                     ".csr 2>/dev/null && openssl x509 -req -in ", name,
                     ".csr -CA ", ca, ".pem -CAkey ", ca,
                     ".key -CAcreateserial ", "-days 2 -extfile ", name,
                     ".ext -out ", name, ".pem 2>/dev/null"));
  }

  const std::string dir_;
};

constexpr char kOrdersToken[] = "orders-secret-token";
constexpr char kBillingToken[] = "billing-secret-token";
constexpr char kOpsToken[] = "ops-secret-token";
constexpr char kLateToken[] = "late-comer-token";
constexpr char kQuotaToken[] = "quota-token";

std::string AuthFile(bool with_late_comer = false) {
  std::string text = absl::StrCat(
      "# principals of the security test\n"
      "principal orders\n"
      "  token sha256:",
      server::auth::Sha256Hex(kOrdersToken), "\n",
      "  identity orders-client\n"
      "  grant schedule,cancel,read,consume orders.*\n"
      "principal billing\n"
      "  token sha256:",
      server::auth::Sha256Hex(kBillingToken), "\n",
      "  grant schedule,read,consume billing.*\n"
      "principal ops\n"
      "  token sha256:",
      server::auth::Sha256Hex(kOpsToken), "\n", "  grant admin *\n",
      "principal quota\n"
      "  token sha256:",
      server::auth::Sha256Hex(kQuotaToken), "\n",
      "  grant schedule,read,consume quota.*\n"
      "  quota pending quota.* 3\n"
      "  quota subscriptions 1\n");
  if (with_late_comer) {
    absl::StrAppend(&text, "principal late\n  token sha256:",
                    server::auth::Sha256Hex(kLateToken),
                    "\n  grant read late.*\n");
  }
  return text;
}

// A channel over TLS trusting `ca_pem`, with a client certificate when
// `cert_pem` is set.
std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                          const std::string& ca_pem,
                                          const std::string& cert_pem = "",
                                          const std::string& key_pem = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  ssl.pem_cert_chain = cert_pem;
  ssl.pem_private_key = key_pem;
  grpc::ChannelArguments args;
  // Each channel its own connection: a rotated certificate shows on a new
  // channel only if it does not share the old one's subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

void Authorize(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  SetDeadline(context, absl::Seconds(10));
}

v1::JobSpec Job(const std::string& topic, const std::string& id,
                absl::Duration delay = absl::Hours(1)) {
  v1::JobSpec job;
  job.set_topic(topic);
  job.set_id(id);
  job.set_payload("p");
  job.mutable_delay()->set_seconds(absl::ToInt64Seconds(delay));
  return job;
}

grpc::Status Schedule(v1::DelayQueue::Stub& stub, const std::string& token,
                      const v1::JobSpec& job) {
  grpc::ClientContext context;
  Authorize(context, token);
  v1::ScheduleRequest request;
  *request.mutable_job() = job;
  v1::ScheduleResponse response;
  return stub.Schedule(&context, request, &response);
}

grpc::Status GetJob(v1::DelayQueue::Stub& stub, const std::string& token,
                    const std::string& topic, const std::string& id) {
  grpc::ClientContext context;
  Authorize(context, token);
  v1::GetJobRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  v1::Job job;
  return stub.GetJob(&context, request, &job);
}

// A Subscribe stream with its own context.
struct Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader;

  Stream(v1::DelayQueue::Stub& stub, const std::string& token,
         const std::string& topic) {
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
    v1::SubscribeRequest request;
    request.set_topic(topic);
    request.set_max_in_flight(10);
    reader = stub.Subscribe(&context, request);
  }
  ~Stream() {
    if (finished) return;
    context.TryCancel();
    v1::SubscribeResponse ignored;
    while (reader->Read(&ignored)) {
    }
    reader->Finish().ok();
  }
  // REQUIRES: Next() returned nullopt. The stream's status.
  grpc::Status Finish() {
    finished = true;
    return reader->Finish();
  }
  bool finished = false;
  // The next delivery, or nullopt when the stream ended.
  std::optional<v1::Delivery> Next() {
    v1::SubscribeResponse message;
    if (!reader->Read(&message) || message.deliveries_size() == 0) {
      return std::nullopt;
    }
    return message.deliveries(0);
  }
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    pki_ = std::make_unique<Pki>(dir_);
    pki_->Make();
    if (HasFatalFailure()) return;
    auth_file_ = dir_ + "/auth.txt";
    WriteAll(auth_file_, AuthFile());
    // The server reads its certificate from fixed paths, so that a test can
    // rotate it.
    WriteAll(dir_ + "/tls.pem", pki_->Pem("server1.pem"));
    WriteAll(dir_ + "/tls.key", pki_->Pem("server1.key"));
  }

  // Starts delayd with TLS and the auth file, plus `extra`; waits until it
  // serves (health over a channel trusting CA 1, with the orders client
  // certificate for mutual TLS).
  void StartServer(std::vector<std::string> extra = {},
                   const std::string& data = "") {
    std::vector<std::string> args = {"--tls-cert=" + dir_ + "/tls.pem",
                                     "--tls-key=" + dir_ + "/tls.key",
                                     "--auth-file=" + auth_file_};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
        DelaydProcess::Launch(args, data);
    ASSERT_TRUE(process.ok()) << process.status();
    server_ = *std::move(process);
    ASSERT_TRUE(
        server_
            ->WaitServing(
                absl::Seconds(30),
                TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem"),
                           pki_->Pem("orders.pem"), pki_->Pem("orders.key")))
            .ok())
        << server_->Log();
  }

  std::unique_ptr<v1::DelayQueue::Stub> Stub(
      std::shared_ptr<grpc::Channel> channel) {
    return v1::DelayQueue::NewStub(std::move(channel));
  }
  std::unique_ptr<v1::DelayQueue::Stub> TlsStub() {
    return Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem")));
  }

  std::string dir_;
  std::unique_ptr<Pki> pki_;
  std::string auth_file_;
  std::unique_ptr<DelaydProcess> server_;
};

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

TEST_F(SecurityTest, PlainTextDoesNotReachATlsPort) {
  StartServer();
  auto stub = Stub(grpc::CreateChannel(server_->grpc_address(),
                                       grpc::InsecureChannelCredentials()));
  EXPECT_EQ(
      Schedule(*stub, kOrdersToken, Job("orders.close", "x")).error_code(),
      grpc::StatusCode::UNAVAILABLE);
  // Nor does a client that does not trust the server's CA.
  auto untrusting =
      Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca2.pem")));
  EXPECT_EQ(Schedule(*untrusting, kOrdersToken, Job("orders.close", "x"))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
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

TEST_F(SecurityTest, MutualTlsNamesThePrincipal) {
  StartServer({"--tls-client-ca=" + pki_->Path("ca1.pem")});
  // Without a client certificate there is no connection.
  auto anonymous = TlsStub();
  EXPECT_EQ(
      Schedule(*anonymous, kOrdersToken, Job("orders.close", "a")).error_code(),
      grpc::StatusCode::UNAVAILABLE);
  // The orders client's certificate is principal orders, without a token.
  auto orders =
      Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem"),
                      pki_->Pem("orders.pem"), pki_->Pem("orders.key")));
  EXPECT_TRUE(Schedule(*orders, "", Job("orders.close", "m1")).ok());
  EXPECT_EQ(Schedule(*orders, "", Job("billing.x", "m2")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A certificate the CA signed, of nobody in the auth file.
  auto stranger =
      Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem"),
                      pki_->Pem("stranger.pem"), pki_->Pem("stranger.key")));
  EXPECT_EQ(Schedule(*stranger, "", Job("orders.close", "m3")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A token still names its own principal over mutual TLS.
  EXPECT_TRUE(Schedule(*stranger, kBillingToken, Job("billing.x", "m4")).ok());
  EXPECT_EQ(GetJob(*orders, "", "orders.close", "m3").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(SecurityTest, RotatedCertificateIsUsedWhileAStreamGoesOn) {
  StartServer({"--tls-reload-interval=1s"});
  auto old_stub = TlsStub();
  Stream stream(*old_stub, kOrdersToken, "orders.rotate");
  ASSERT_TRUE(Schedule(*old_stub, kOrdersToken,
                       Job("orders.rotate", "before", absl::ZeroDuration()))
                  .ok());
  std::optional<v1::Delivery> first = stream.Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->job().id(), "before");

  // Rotate to a certificate of CA 2: key first, each file replaced whole.
  WriteAll(dir_ + "/tls.key.new", pki_->Pem("server2.key"));
  WriteAll(dir_ + "/tls.pem.new", pki_->Pem("server2.pem"));
  ASSERT_EQ(
      std::rename((dir_ + "/tls.key.new").c_str(), (dir_ + "/tls.key").c_str()),
      0);
  ASSERT_EQ(
      std::rename((dir_ + "/tls.pem.new").c_str(), (dir_ + "/tls.pem").c_str()),
      0);
  // A new connection trusting only CA 2 gets through once delayd re-read
  // the files.
  bool rotated = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20);
       !rotated && absl::Now() < deadline;) {
    auto fresh =
        Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca2.pem")));
    rotated =
        GetJob(*fresh, kOrdersToken, "orders.rotate", "none").error_code() ==
        grpc::StatusCode::NOT_FOUND;
    if (!rotated) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(rotated) << server_->Log();
  // ... and one trusting only CA 1 no longer does.
  EXPECT_EQ(Schedule(*TlsStub(), kOrdersToken, Job("orders.rotate", "x"))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // The old connection and its stream go on.
  ASSERT_TRUE(Schedule(*old_stub, kOrdersToken,
                       Job("orders.rotate", "after", absl::ZeroDuration()))
                  .ok());
  std::optional<v1::Delivery> second = stream.Next();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->job().id(), "after");
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

// The message delayd exits with when started with `args`.
std::string RefusedStart(const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
      DelaydProcess::Launch(args);
  EXPECT_FALSE(process.ok()) << "delayd started with " << args.front();
  return std::string(process.status().message());
}

TEST(SecureByDefaultTest, AnyAddressNeedsTlsAndAuth) {
  const std::string message = RefusedStart({"--listen=0.0.0.0:0"});
  EXPECT_NE(message.find("--listen=0.0.0.0:0 is not a loopback address"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("missing --tls-cert and --tls-key and --auth-file"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--insecure"), std::string::npos) << message;

  const std::string http = RefusedStart({"--http-listen=0.0.0.0:0"});
  EXPECT_NE(http.find("--http-listen=0.0.0.0:0 is not a loopback address"),
            std::string::npos)
      << http;
}

TEST(SecureByDefaultTest, InsecureServesAnyAddressWithAWarning) {
  absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
      DelaydProcess::Launch({"--listen=0.0.0.0:0", "--insecure"});
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_NE((*process)->Log().find("WARN delayd: --insecure"),
            std::string::npos)
      << (*process)->Log();
}

}  // namespace
}  // namespace delayd::testing
