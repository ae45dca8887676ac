// Server: one running delayd — the gRPC server (DelayQueue, grpc.health.v1,
// reflection) and the metrics endpoint — built from a Config.
//
// Lifecycle: Start() binds and serves; Shutdown() drains (health goes
// NOT_SERVING, new calls are refused, calls in progress get up to the grace
// period, streams end) and returns once everything has stopped.
// Thread-safe: Shutdown() may be called from any thread, once.
#ifndef DELAYD_SERVER_SERVER_H_
#define DELAYD_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/config.h"
#include "server/delay_queue_service.h"
#include "server/metrics.h"

namespace delayd::server {

class Server {
 public:
  // The name under which the job API reports its health.
  static constexpr char kServiceName[] = "delayd.v1.DelayQueue";

  // Returns UNAVAILABLE when an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const Config& config);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // host:port actually bound, for gRPC and for /metrics.
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }

  void Shutdown();

 private:
  Server(const Config& config, std::unique_ptr<Metrics> metrics);

  const Config config_;
  std::unique_ptr<Metrics> metrics_;
  DelayQueueService service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string grpc_address_;
  std::string metrics_address_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_SERVER_H_
