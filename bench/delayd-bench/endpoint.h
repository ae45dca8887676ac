// Endpoint: how every channel and call of a delayd-bench run reaches the
// server — --target, TLS (--tls-ca, --tls-cert, --tls-key,
// --tls-server-name) and the bearer token (--token, default $DELAYD_TOKEN)
// — and the channels and call contexts made from it. Read once at startup;
// a plain value, shared read-only by every thread afterwards.
#ifndef DELAYD_BENCH_DELAYD_BENCH_ENDPOINT_H_
#define DELAYD_BENCH_DELAYD_BENCH_ENDPOINT_H_

#include <memory>
#include <string>

#include "bench/delayd-bench/args.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"

namespace delayd::bench {

struct Endpoint {
  std::string target = "127.0.0.1:7400";  // host:port
  // TLS credentials; null: plain TCP.
  std::shared_ptr<grpc::ChannelCredentials> tls;
  // With TLS: the name the server's certificate must carry; empty: the host
  // of `target`.
  std::string tls_server_name;
  // Sent with every call as `authorization: Bearer TOKEN`; empty: none.
  std::string token;
};

// Reads the options above from `args` (TLS is on with --tls-ca; --tls-cert
// and --tls-key go together and need it, as does --tls-server-name). Exits
// 2 with a message naming the option or the PEM file that cannot be read.
Endpoint ReadEndpoint(Args& args);

// A channel with its own TCP connection (gRPC would otherwise share one
// connection among channels with equal arguments; `tag` tells them apart),
// reconnecting within milliseconds when the server is not up yet.
std::shared_ptr<grpc::Channel> NewChannel(const Endpoint& endpoint, int tag);

// Adds the token's metadata to `context`, when there is a token. Every
// context delayd-bench makes goes through here.
void Authorize(const Endpoint& endpoint, grpc::ClientContext* context);

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_ENDPOINT_H_
