// How a client proves itself to delayd and checks the server: TLS channel
// credentials read from PEM files, and the bearer token every call carries
// as `authorization: Bearer TOKEN` (docs/security.md). Shared by the client
// library and delayctl (which must not depend on the library). Free
// functions; thread-safe.
#ifndef DELAYD_CLIENT_CONNECTION_CREDENTIALS_H_
#define DELAYD_CLIENT_CONNECTION_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"

namespace delayd::connection {

// TLS credentials (grpc::SslCredentials) from PEM files, read here, once.
// `ca_file`: the CAs the server's certificate must chain to; empty: the
// system's roots (gRPC's default). `cert_file` and `key_file`: the client's
// certificate chain and private key, for mutual TLS; both or neither.
// INVALID_ARGUMENT naming the file when one cannot be read or holds no
// "-----BEGIN" line (not PEM), or naming both when only one is given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(
    const std::string& ca_file, const std::string& cert_file,
    const std::string& key_file);

// The environment variable that holds the default token.
constexpr char kTokenEnvironment[] = "DELAYD_TOKEN";

// The value of $DELAYD_TOKEN; empty when it is unset.
std::string TokenFromEnvironment();

// The metadata key, and its value for `token` ("Bearer TOKEN").
constexpr char kAuthorizationKey[] = "authorization";
std::string AuthorizationValue(absl::string_view token);

// OK when `token` can go in metadata: printable ASCII (0x20-0x7E), as gRPC
// requires of a text header, which it would otherwise refuse by aborting the
// process. INVALID_ARGUMENT naming the first bad byte's position (never the
// token itself) otherwise.
absl::Status CheckToken(absl::string_view token);

}  // namespace delayd::connection

#endif  // DELAYD_CLIENT_CONNECTION_CREDENTIALS_H_
