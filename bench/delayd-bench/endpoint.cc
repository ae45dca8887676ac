#include "bench/delayd-bench/endpoint.h"

#include "absl/status/statusor.h"
#include "bench/delayd-bench/args.h"
#include "client/connection/credentials.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace delayd::bench {

Endpoint ReadEndpoint(Args& args) {
  Endpoint e;
  e.target = args.Str("target", e.target);
  e.token = args.Str("token", connection::TokenFromEnvironment());
  if (absl::Status s = connection::CheckToken(e.token); !s.ok()) {
    Fail("--token: " + std::string(s.message()));
  }
  const std::string ca = args.Str("tls-ca", "");
  const std::string cert = args.Str("tls-cert", "");
  const std::string key = args.Str("tls-key", "");
  e.tls_server_name = args.Str("tls-server-name", "");
  if (ca.empty()) {
    if (!cert.empty() || !key.empty() || !e.tls_server_name.empty()) {
      Fail("--tls-cert, --tls-key and --tls-server-name need --tls-ca");
    }
    return e;
  }
  if (cert.empty() != key.empty()) Fail("--tls-cert and --tls-key go together");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
      connection::TlsChannelCredentials(ca, cert, key);
  if (!tls.ok()) Fail(std::string(tls.status().message()));
  e.tls = *std::move(tls);
  return e;
}

std::shared_ptr<grpc::Channel> NewChannel(const Endpoint& endpoint, int tag) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("delayd_bench.connection", tag);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 50);
  args.SetMaxReceiveMessageSize(64 << 20);
  if (endpoint.tls != nullptr && !endpoint.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(endpoint.tls_server_name);
  }
  return grpc::CreateCustomChannel(endpoint.target,
                                   endpoint.tls != nullptr
                                       ? endpoint.tls
                                       : grpc::InsecureChannelCredentials(),
                                   args);
}

void Authorize(const Endpoint& endpoint, grpc::ClientContext* context) {
  if (!endpoint.token.empty()) {
    context->AddMetadata(connection::kAuthorizationKey,
                         connection::AuthorizationValue(endpoint.token));
  }
}

}  // namespace delayd::bench
