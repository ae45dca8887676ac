// Unit tests of client/connection/credentials.h: which PEM files
// TlsChannelCredentials refuses and how it names them, that real PEM files
// (made by openssl) are accepted, and the token helpers.
#include "client/connection/credentials.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/test_certificate.h"
#include "tests/support/status_matchers.h"

namespace delayd::connection {
namespace {

using ::delayd::testing::TestCertificate;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class TlsChannelCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(certificate_, TestCertificate::Make());
  }

  // A file of `contents` in the certificate's temp dir; its path.
  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::string path = certificate_->dir() + "/" + name;
    std::ofstream(path) << contents;
    return path;
  }

  std::unique_ptr<TestCertificate> certificate_;
};

TEST_F(TlsChannelCredentialsTest, AMissingFileIsRefusedByName) {
  const std::string missing = certificate_->dir() + "/no-such.pem";
  auto ca = TlsChannelCredentials(missing, "", "");
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ca.status().message()),
              AllOf(HasSubstr("CA file"), HasSubstr(missing),
                    HasSubstr("No such file")));

  auto cert = TlsChannelCredentials("", missing, certificate_->key_file());
  EXPECT_EQ(cert.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cert.status().message()),
              AllOf(HasSubstr("certificate file"), HasSubstr(missing)));

  auto key = TlsChannelCredentials("", certificate_->cert_file(), missing);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(key.status().message()),
              AllOf(HasSubstr("key file"), HasSubstr(missing)));
}

TEST_F(TlsChannelCredentialsTest, ADirectoryIsRefusedByName) {
  auto ca = TlsChannelCredentials(certificate_->dir(), "", "");
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ca.status().message()),
              AllOf(HasSubstr(certificate_->dir()), HasSubstr("directory")));
}

TEST_F(TlsChannelCredentialsTest,
       ACertificateWithoutItsKeyIsRefusedNamingBoth) {
  auto cert_only = TlsChannelCredentials("", certificate_->cert_file(), "");
  EXPECT_EQ(cert_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cert_only.status().message()),
              AllOf(HasSubstr("certificate file"), HasSubstr("key file"),
                    HasSubstr(certificate_->cert_file())));

  auto key_only = TlsChannelCredentials("", "", certificate_->key_file());
  EXPECT_EQ(key_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(key_only.status().message()),
              AllOf(HasSubstr("certificate file"), HasSubstr("key file"),
                    HasSubstr(certificate_->key_file())));
}

TEST_F(TlsChannelCredentialsTest, AFileWithoutPemIsRefusedAsNotPem) {
  const std::string text = WriteFile("notes.txt", "not a certificate\n");
  const std::string empty = WriteFile("empty.pem", "");
  for (const std::string& path : {text, empty}) {
    auto ca = TlsChannelCredentials(path, "", "");
    EXPECT_EQ(ca.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(ca.status().message()),
                AllOf(HasSubstr(path), HasSubstr("not PEM")));
  }
  auto key = TlsChannelCredentials("", certificate_->cert_file(), text);
  EXPECT_THAT(std::string(key.status().message()),
              AllOf(HasSubstr("key file"), HasSubstr("not PEM")));
}

TEST_F(TlsChannelCredentialsTest, RealPemFilesMakeCredentials) {
  // Server verified by a CA file; by the system's roots with a client
  // certificate; by a CA file with a client certificate.
  for (auto [ca, cert, key] :
       {std::tuple<std::string, std::string, std::string>{
            certificate_->cert_file(), "", ""},
        {"", certificate_->cert_file(), certificate_->key_file()},
        {certificate_->cert_file(), certificate_->cert_file(),
         certificate_->key_file()}}) {
    auto credentials = TlsChannelCredentials(ca, cert, key);
    ASSERT_OK(credentials);
    EXPECT_NE(*credentials, nullptr);
  }
}

TEST(TlsChannelCredentialsSystemRootsTest, NoFilesMeansTheSystemsRoots) {
  auto credentials = TlsChannelCredentials("", "", "");
  ASSERT_OK(credentials);
  EXPECT_NE(*credentials, nullptr);
}

TEST(TokenTest, TokenFromEnvironmentIsEmptyWhenUnset) {
  ASSERT_EQ(setenv(kTokenEnvironment, "from-env", 1), 0);
  EXPECT_EQ(TokenFromEnvironment(), "from-env");
  ASSERT_EQ(unsetenv(kTokenEnvironment), 0);
  EXPECT_EQ(TokenFromEnvironment(), "");
}

TEST(TokenTest, AuthorizationIsBearer) {
  EXPECT_EQ(AuthorizationValue("abc.DEF-123"), "Bearer abc.DEF-123");
}

TEST(TokenTest, OnlyPrintableAsciiCanBeSentAndTheErrorHidesTheToken) {
  EXPECT_OK(CheckToken(""));
  EXPECT_OK(CheckToken("abc.DEF_123-~+/= !"));
  for (const std::string& bad :
       {std::string("secret\n"), std::string("sec\tret"),
        std::string("s\xc3\xa9"
                    "cret"),
        std::string("se\0cret", 7)}) {
    absl::Status s = CheckToken(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("printable ASCII"), Not(HasSubstr("cret"))));
  }
  EXPECT_THAT(std::string(CheckToken("secret\n").message()),
              HasSubstr("byte 7 of 7"));
}

}  // namespace
}  // namespace delayd::connection
