// delayctl's global flags for security, Run() in-process against an
// in-process RecordingServer: --token and $DELAYD_TOKEN on every call
// (unary, health, subscribe), --tls, --tls-ca, --tls-cert, --tls-key and
// --tls-server-name, and their usage errors.
#include <stdlib.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "client/delayctl/delayctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/recording_server.h"
#include "tests/client/test_certificate.h"
#include "tests/support/status_matchers.h"

namespace delayd::delayctl {
namespace {

using ::delayd::testing::RecordingServer;
using ::delayd::testing::TestCertificate;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kTokenEnvironment[] = "DELAYD_TOKEN";

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunInProcess(const std::vector<std::string>& args) {
  std::istringstream in;
  std::ostringstream out, err;
  const int code = Run(args, Io{&in, &out, &err});
  return {code, out.str(), err.str()};
}

class EndpointFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(unsetenv(kTokenEnvironment), 0);
    ASSERT_OK_AND_ASSIGN(certificate_, TestCertificate::Make());
  }
  void TearDown() override { unsetenv(kTokenEnvironment); }

  // `args` after --server for `server`.
  static std::vector<std::string> To(const RecordingServer& server,
                                     std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server.address(), "--timeout=5s"});
    return args;
  }

  std::unique_ptr<TestCertificate> certificate_;
};

TEST_F(EndpointFlagsTest, ClientCertificateAndServerNameNeedTls) {
  for (const std::string& flag : std::vector<std::string>{
           "--tls-cert", "--tls-key", "--tls-server-name"}) {
    Result r = RunInProcess({flag, "x", "stats"});
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_EQ(r.err,
              "delayctl: " + flag + " needs TLS on (--tls or --tls-ca)\n");
  }
  // After the command name too.
  EXPECT_EQ(RunInProcess({"stats", "--tls-cert=x"}).code, kExitUsage);
}

TEST_F(EndpointFlagsTest, CertificateAndKeyGoTogether) {
  Result r =
      RunInProcess({"--tls", "--tls-cert", certificate_->cert_file(), "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "delayctl: --tls-cert and --tls-key go together (mutual TLS "
            "needs both)\n");
  EXPECT_EQ(RunInProcess({"--tls-ca", certificate_->cert_file(), "--tls-key",
                          certificate_->key_file(), "stats"})
                .code,
            kExitUsage);
}

TEST_F(EndpointFlagsTest, FilesThatCannotBeUsedAreUsageErrorsNamingThem) {
  const std::string missing = certificate_->dir() + "/missing.pem";
  Result r = RunInProcess({"--tls-ca", missing, "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "delayctl: cannot read CA file \"" + missing +
                       "\": No such file or directory\n");
  r = RunInProcess({"--tls", "--tls-cert", certificate_->cert_file(),
                    "--tls-key", missing, "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("key file \"" + missing + "\""));
  const std::string text = certificate_->dir() + "/notes.txt";
  std::ofstream(text) << "not a certificate\n";
  r = RunInProcess({"--tls-ca", text, "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "delayctl: CA file \"" + text +
                       "\" is not PEM (no \"-----BEGIN\" line)\n");
  r = RunInProcess({"--tls-ca", certificate_->dir(), "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
  r = RunInProcess({"--tls-ca=", "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "delayctl: --tls-ca: empty\n");
}

TEST_F(EndpointFlagsTest, HelpListsTheFlags) {
  Result r = RunInProcess({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  for (const char* flag :
       {"--token TOKEN", "--tls ", "--tls-ca PATH", "--tls-cert PATH",
        "--tls-key PATH", "--tls-server-name NAME", "$DELAYD_TOKEN"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST_F(EndpointFlagsTest, TheTokenGoesWithEveryKindOfCall) {
  RecordingServer server;
  EXPECT_EQ(RunInProcess(To(server, {"--token", "s3cret", "stats"})).code,
            kExitOk);
  EXPECT_EQ(RunInProcess(To(server, {"health", "--token=s3cret"})).code,
            kExitOk);
  EXPECT_EQ(
      RunInProcess(To(server, {"--token", "s3cret", "subscribe", "t"})).code,
      kExitOk);
  EXPECT_THAT(server.Seen("GetStats"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server.Seen("Check"), ElementsAre("Bearer s3cret"));
  EXPECT_THAT(server.Seen("Subscribe"), ElementsAre("Bearer s3cret"));
}

TEST_F(EndpointFlagsTest, TheTokenDefaultsToDelaydTokenAndTheFlagWins) {
  RecordingServer server;
  ASSERT_EQ(setenv(kTokenEnvironment, "from-env", 1), 0);
  EXPECT_EQ(RunInProcess(To(server, {"stats"})).code, kExitOk);
  EXPECT_EQ(RunInProcess(To(server, {"stats", "--token", "from-flag"})).code,
            kExitOk);
  // An empty flag sends none.
  EXPECT_EQ(RunInProcess(To(server, {"--token=", "stats"})).code, kExitOk);
  EXPECT_THAT(server.Seen("GetStats"),
              ElementsAre("Bearer from-env", "Bearer from-flag",
                          RecordingServer::kNone));
}

TEST_F(EndpointFlagsTest, ATokenThatCannotBeSentIsAUsageErrorThatHidesIt) {
  RecordingServer server;
  ASSERT_EQ(setenv(kTokenEnvironment, "s3cret\n", 1), 0);
  Result r = RunInProcess(To(server, {"stats"}));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("$DELAYD_TOKEN: "));
  EXPECT_THAT(r.err, Not(HasSubstr("s3cret")));
  r = RunInProcess(To(server, {"--token",
                               "s3\x01"
                               "cret",
                               "stats"}));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--token: "));
  EXPECT_THAT(server.Seen("GetStats"), IsEmpty());
}

TEST_F(EndpointFlagsTest, UnauthenticatedWithoutATokenSaysHowToGiveOne) {
  RecordingServer server;
  server.RequireToken("right");
  Result r = RunInProcess(To(server, {"stats"}));
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_THAT(r.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(r.err, HasSubstr("--token or $DELAYD_TOKEN"));
  r = RunInProcess(To(server, {"stats", "--token", "wrong"}));
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_THAT(r.err, Not(HasSubstr("--token or $DELAYD_TOKEN")));
}

TEST_F(EndpointFlagsTest, MutualTlsWithTheServerNameOverridden) {
  RecordingServer server(RecordingServer::Tls{certificate_->cert_pem(),
                                              certificate_->key_pem(),
                                              certificate_->cert_pem()});
  // The certificate names localhost; --server is 127.0.0.1.
  const std::vector<std::string> tls = {
      "--tls-ca",          certificate_->cert_file(),
      "--tls-server-name", "localhost",
      "--token",           "s3cret"};
  std::vector<std::string> mutual = tls;
  mutual.insert(mutual.end(), {"--tls-cert", certificate_->cert_file(),
                               "--tls-key", certificate_->key_file(), "stats"});
  Result r = RunInProcess(To(server, mutual));
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(server.Seen("GetStats"), ElementsAre("Bearer s3cret"));

  // Without the client certificate, the server refuses the handshake.
  std::vector<std::string> no_cert = tls;
  no_cert.push_back("stats");
  r = RunInProcess(To(server, no_cert));
  EXPECT_EQ(r.code, kExitUnavailable);
  EXPECT_THAT(server.Seen("GetStats"), ElementsAre("Bearer s3cret"));
}

TEST_F(EndpointFlagsTest, TlsChecksTheNameInTheServersCertificate) {
  RecordingServer server(RecordingServer::Tls{certificate_->cert_pem(),
                                              certificate_->key_pem(), ""});
  // 127.0.0.1 is not the certificate's name.
  Result r = RunInProcess(
      To(server, {"--tls-ca", certificate_->cert_file(), "stats"}));
  EXPECT_EQ(r.code, kExitUnavailable);
  // The system's roots do not verify it.
  r = RunInProcess(
      To(server, {"--tls", "--tls-server-name=localhost", "stats"}));
  EXPECT_EQ(r.code, kExitUnavailable);
  // Plain TCP to a TLS port does not get through either.
  r = RunInProcess(To(server, {"stats"}));
  EXPECT_EQ(r.code, kExitUnavailable);
  EXPECT_THAT(server.Seen("GetStats"), IsEmpty());
  r = RunInProcess(To(server, {"--tls-ca", certificate_->cert_file(),
                               "--tls-server-name=localhost", "stats"}));
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(server.Seen("GetStats"), ElementsAre(RecordingServer::kNone));
}

}  // namespace
}  // namespace delayd::delayctl
