#include "client/connection/credentials.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace delayd::connection {
namespace {

// The contents of the PEM file `path`, `what` naming its role in errors.
absl::StatusOr<std::string> ReadPem(const std::string& what,
                                    const std::string& path) {
  auto cannot_read = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " \"", path, "\": ", why));
  };
  // A directory opens, and reading it fails inside the stream.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    return cannot_read("is a directory");
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return cannot_read(errno != 0 ? std::strerror(errno) : "cannot open");
  }
  std::stringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return cannot_read("read failed");
  std::string pem = std::move(contents).str();
  if (pem.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", path, "\" is not PEM (no \"-----BEGIN\" line)"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const std::string& ca_file, const std::string& cert_file,
    const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a client certificate file and its key file go together: got ",
        cert_file.empty()
            ? "key file \"" + key_file + "\" without a certificate file"
            : "certificate file \"" + cert_file + "\" without a key file"));
  }
  grpc::SslCredentialsOptions options;
  if (!ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("CA file", ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (!cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("certificate file", cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("key file", key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

std::string TokenFromEnvironment() {
  const char* token = std::getenv(kTokenEnvironment);
  return token == nullptr ? "" : token;
}

std::string AuthorizationValue(absl::string_view token) {
  return absl::StrCat("Bearer ", token);
}

absl::Status CheckToken(absl::string_view token) {
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token's byte ", i + 1, " of ", token.size(),
                       " is not printable ASCII, as gRPC metadata must be"));
    }
  }
  return absl::OkStatus();
}

}  // namespace delayd::connection
