// End-to-end: the transport of delayd's security against the real binary —
// a TLS port refuses plain text and untrusting clients, mutual TLS names
// the principal by its certificate, a certificate rotated on disk is used
// while a subscription streams, and a non-loopback address needs TLS and
// an auth file unless --insecure.
#include <signal.h>

#include <string>
#include <vector>

#include "tests/e2e/security_fixture.h"

namespace delayd::testing::security {
namespace {

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
}  // namespace delayd::testing::security
