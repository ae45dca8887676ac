// TestCertificate: a self-signed certificate for CN=localhost (P-256, one
// day) and its private key, made by `openssl req -x509` as PEM files in a
// temp dir of its own, removed with the object. The certificate is its own
// CA, so it serves as the server's certificate, the client's, and the CA
// file of both sides. Not thread-safe; one per test.
#ifndef DELAYD_TESTS_CLIENT_TEST_CERTIFICATE_H_
#define DELAYD_TESTS_CLIENT_TEST_CERTIFICATE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace delayd::testing {

class TestCertificate {
 public:
  // Runs openssl; INTERNAL with its exit status when it fails.
  static absl::StatusOr<std::unique_ptr<TestCertificate>> Make();
  TestCertificate(const TestCertificate&) = delete;
  TestCertificate& operator=(const TestCertificate&) = delete;
  ~TestCertificate();  // removes dir()

  const std::string& dir() const { return dir_; }
  std::string cert_file() const { return dir_ + "/cert.pem"; }
  std::string key_file() const { return dir_ + "/key.pem"; }
  // The files' contents.
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }

 private:
  explicit TestCertificate(std::string dir) : dir_(std::move(dir)) {}

  const std::string dir_;
  std::string cert_pem_;
  std::string key_pem_;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_CLIENT_TEST_CERTIFICATE_H_
