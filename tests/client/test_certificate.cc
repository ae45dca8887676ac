#include "tests/client/test_certificate.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace delayd::testing {
namespace {

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestCertificate>> TestCertificate::Make() {
  std::string pattern =
      (std::filesystem::path(::testing::TempDir()) / "delayd-tls-XXXXXX")
          .string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  std::unique_ptr<TestCertificate> made(new TestCertificate(pattern));
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 1 -subj /CN=localhost -keyout '",
      made->key_file(), "' -out '", made->cert_file(), "' 2>/dev/null");
  const int status = std::system(command.c_str());
  if (status != 0) {
    return absl::InternalError(
        absl::StrCat("`", command, "` exited with status ", status));
  }
  made->cert_pem_ = Contents(made->cert_file());
  made->key_pem_ = Contents(made->key_file());
  return made;
}

TestCertificate::~TestCertificate() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace delayd::testing
