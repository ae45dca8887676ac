// The client library's side of delayd's security, against an in-process
// RecordingServer (no delayd process): the bearer token on every call and
// stream — from ClientOptions::token, else $DELAYD_TOKEN when the Client is
// made — a token that cannot be sent, and TLS (mutual too) through
// TlsCredentials.
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "delayd/client.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/client/recording_server.h"
#include "tests/client/test_certificate.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

using client::CallOptions;
using client::Client;
using client::ClientOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kTokenEnvironment[] = "DELAYD_TOKEN";

// One attempt, a short deadline: a call that cannot connect fails soon.
CallOptions Once() {
  CallOptions call;
  call.deadline = absl::Seconds(5);
  client::RpcRetryPolicy once;
  once.max_attempts = 1;
  call.retry = once;
  return call;
}

// One unary call, a health check and a Subscribe stream through `client`.
void CallEveryKind(Client& client) {
  EXPECT_OK(client.GetJob("t", "a", Once()));
  EXPECT_OK(client.CheckHealth(Once()));
  std::unique_ptr<client::DeliveryStream> stream =
      client.Subscribe("t", "consumer", 0);
  v1::Delivery delivery;
  EXPECT_FALSE(stream->Next(&delivery));
  EXPECT_OK(stream->Finish());
}

class ClientTokenTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(unsetenv(kTokenEnvironment), 0); }
  void TearDown() override { unsetenv(kTokenEnvironment); }

  ClientOptions Options(const std::string& token) const {
    ClientOptions options;
    options.target = server_.address();
    options.token = token;
    return options;
  }

  RecordingServer server_;
};

TEST_F(ClientTokenTest, TheTokenGoesWithUnaryCallsHealthChecksAndSubscribe) {
  Client client(Options("s3cret"));
  CallEveryKind(client);
  EXPECT_THAT(server_.Seen("GetJob"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server_.Seen("Check"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server_.Seen("Subscribe"), ElementsAre("Bearer s3cret"));
}

TEST_F(ClientTokenTest, EveryRetriedAttemptCarriesTheToken) {
  server_.FailNext(2);
  Client client(Options("s3cret"));
  CallOptions call;
  call.deadline = absl::Seconds(10);
  EXPECT_OK(client.GetJob("t", "a", call));
  EXPECT_THAT(server_.Seen("GetJob"),
              ElementsAre("Bearer s3cret", "Bearer s3cret", "Bearer s3cret"));
}

TEST_F(ClientTokenTest, AnEmptyTokenTakesDelaydTokenWhenTheClientIsMade) {
  ASSERT_EQ(setenv(kTokenEnvironment, "from-env", 1), 0);
  Client client(Options(""));
  // Read when the Client was made: a later change does not matter.
  ASSERT_EQ(setenv(kTokenEnvironment, "changed", 1), 0);
  CallEveryKind(client);
  EXPECT_THAT(server_.Seen("GetJob"), ElementsAre("Bearer from-env"));
  EXPECT_THAT(server_.Seen("Check"), ElementsAre("Bearer from-env"));
  EXPECT_THAT(server_.Seen("Subscribe"), ElementsAre("Bearer from-env"));
}

TEST_F(ClientTokenTest, TheOptionWinsOverTheEnvironment) {
  ASSERT_EQ(setenv(kTokenEnvironment, "from-env", 1), 0);
  Client client(Options("from-options"));
  EXPECT_OK(client.GetJob("t", "a", Once()));
  EXPECT_THAT(server_.Seen("GetJob"), ElementsAre("Bearer from-options"));
}

TEST_F(ClientTokenTest, WithoutATokenNoAuthorizationIsSent) {
  Client client(Options(""));
  CallEveryKind(client);
  EXPECT_THAT(server_.Seen("GetJob"), ElementsAre(RecordingServer::kNone));
  EXPECT_THAT(server_.Seen("Subscribe"), ElementsAre(RecordingServer::kNone));
}

TEST_F(ClientTokenTest, AClientOnAChannelOfItsOwnSendsTheTokenToo) {
  Client client(grpc::CreateChannel(server_.address(),
                                    grpc::InsecureChannelCredentials()),
                Options("s3cret"));
  CallEveryKind(client);
  EXPECT_THAT(server_.Seen("GetJob"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server_.Seen("Subscribe"), ElementsAre("Bearer s3cret"));
}

// gRPC aborts the process on metadata it cannot send; the client refuses
// the calls instead.
TEST_F(ClientTokenTest, ATokenThatCannotBeSentFailsEveryCallAndSendsNothing) {
  Client client(Options("s3cret\n"));
  absl::Status unary = client.GetJob("t", "a", Once()).status();
  EXPECT_EQ(unary.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unary.message()),
              AllOf(HasSubstr("ClientOptions::token"),
                    HasSubstr("printable ASCII"), Not(HasSubstr("s3cret"))));
  EXPECT_EQ(client.CheckHealth(Once()).code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<client::DeliveryStream> stream =
      client.Subscribe("t", "consumer", 0);
  v1::Delivery delivery;
  EXPECT_FALSE(stream->Next(&delivery));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kInvalidArgument);
  // Dropped unfinished, as Subscriber may.
  client.Subscribe("t", "consumer", 0).reset();
  ASSERT_EQ(setenv(kTokenEnvironment, "s3cret\t", 1), 0);
  Client from_env(Options(""));
  EXPECT_THAT(std::string(from_env.GetJob("t", "a", Once()).status().message()),
              AllOf(HasSubstr("$DELAYD_TOKEN"), Not(HasSubstr("s3cret"))));
  EXPECT_THAT(server_.Seen("GetJob"), IsEmpty());
  EXPECT_THAT(server_.Seen("Subscribe"), IsEmpty());
}

class ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(unsetenv(kTokenEnvironment), 0);
    ASSERT_OK_AND_ASSIGN(certificate_, TestCertificate::Make());
  }

  // A server with the certificate; `mutual`: it requires a client
  // certificate the same certificate verifies.
  std::unique_ptr<RecordingServer> StartServer(bool mutual) const {
    return std::make_unique<RecordingServer>(
        RecordingServer::Tls{certificate_->cert_pem(), certificate_->key_pem(),
                             mutual ? certificate_->cert_pem() : ""});
  }

  // A Client of `server` at 127.0.0.1, checking its certificate by the
  // name it carries, localhost. Not by connecting to "localhost": a machine
  // without DNS servers (CI's) fails gRPC's resolver on that name.
  static std::unique_ptr<Client> NewClient(
      const RecordingServer& server,
      std::shared_ptr<grpc::ChannelCredentials> tls) {
    ClientOptions options;
    options.token = "s3cret";
    // A refused handshake is a failed connection attempt: give up on it
    // soon (Client waits this plus a second for one that works).
    options.max_reconnect_backoff = absl::Milliseconds(100);
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    return std::make_unique<Client>(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server.port()),
                                  std::move(tls), args),
        options);
  }

  std::unique_ptr<TestCertificate> certificate_;
};

TEST_F(ClientTlsTest, TheTokenTravelsOverTlsToAServerTheCaVerifies) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_OK_AND_ASSIGN(auto tls,
                       client::TlsCredentials(certificate_->cert_file()));
  std::unique_ptr<Client> owned = NewClient(*server, tls);
  Client& client = *owned;
  CallEveryKind(client);
  EXPECT_THAT(server->Seen("GetJob"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server->Seen("Subscribe"), ElementsAre("Bearer s3cret"));
}

TEST_F(ClientTlsTest, AServerTheCasDoNotVerifyIsNotReached) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_OK_AND_ASSIGN(auto system_roots, client::TlsCredentials(""));
  std::unique_ptr<Client> owned = NewClient(*server, system_roots);
  Client& client = *owned;
  EXPECT_EQ(client.GetJob("t", "a", Once()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(server->Seen("GetJob"), IsEmpty());
}

TEST_F(ClientTlsTest, MutualTlsNeedsTheClientCertificate) {
  auto server = StartServer(/*mutual=*/true);
  ASSERT_OK_AND_ASSIGN(auto with_cert,
                       client::TlsCredentials(certificate_->cert_file(),
                                              certificate_->cert_file(),
                                              certificate_->key_file()));
  std::unique_ptr<Client> owned = NewClient(*server, with_cert);
  Client& client = *owned;
  EXPECT_OK(client.GetJob("t", "a", Once()));
  EXPECT_THAT(server->Seen("GetJob"), ElementsAre("Bearer s3cret"));

  ASSERT_OK_AND_ASSIGN(auto without_cert,
                       client::TlsCredentials(certificate_->cert_file()));
  std::unique_ptr<Client> refused_owned = NewClient(*server, without_cert);
  Client& refused = *refused_owned;
  EXPECT_EQ(refused.GetJob("t", "a", Once()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(server->Seen("GetJob"), ElementsAre("Bearer s3cret"));
}

TEST(TlsCredentialsTest, RefusalsNameTheFile) {
  auto missing = client::TlsCredentials("/no/such/ca.pem");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/no/such/ca.pem"));
  auto half = client::TlsCredentials("", "/some/cert.pem");
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(half.status().message()), HasSubstr("key file"));
}

}  // namespace
}  // namespace delayd::testing
