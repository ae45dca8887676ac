// Server: one running delayd — the job store, the job logic with its timer,
// the gRPC server (DelayQueue, grpc.health.v1, reflection) and the HTTP
// server (/metrics, /healthz, the JSON API) — built from a Config.
//
// Security (docs/security.md): TLS on the gRPC port from Config's files,
// re-read as they change; with an auth file, every call's principal and
// grants checked (Access), the file re-read by ReloadAuth.
//
// Lifecycle: Start() opens the store and binds the ports, with health
// NOT_SERVING and job rpcs (gRPC and HTTP) answering UNAVAILABLE; Recover()
// rebuilds the timers from the store and turns health SERVING; Shutdown()
// drains (health NOT_SERVING, new calls refused with UNAVAILABLE, calls in
// progress get up to the grace period, streams end), stops the timer, closes
// the store. Not thread-safe: one thread drives the lifecycle.
#ifndef DELAYD_SERVER_SERVER_H_
#define DELAYD_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/config.h"
#include "server/core/access.h"
#include "server/core/job_service.h"
#include "server/core/quota_keeper.h"
#include "server/http/http_server.h"
#include "server/http/json_api.h"
#include "server/metrics/delivery_metrics.h"
#include "server/metrics/instrumented_store.h"
#include "server/metrics/metrics.h"
#include "server/metrics/quota_metrics.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/delay_queue_service.h"
#include "server/timer/clock.h"
#include "storage/rocksdb_job_store.h"

namespace delayd::server {

class Server {
 public:
  // Largest request accepted, in bytes (gRPC refuses larger ones with
  // RESOURCE_EXHAUSTED).
  static constexpr int kMaxMessageBytes = 16 << 20;

  // Returns UNAVAILABLE when an address cannot be bound, or the store's
  // error when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const Config& config);

  // Rebuilds the timers from the store, then serves. Returns what recovery
  // found, or the store's error (the server then stays NOT_SERVING).
  absl::StatusOr<JobService::RecoveryStats> Recover();

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // host:port actually bound, for gRPC and for HTTP.
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }

  void Shutdown();

  // Reads the auth file again (SIGHUP). On an error the server keeps the
  // one it has and returns the error. Without an auth file: OK.
  absl::Status ReloadAuth() { return access_->Reload(); }

 private:
  Server(const Config& config, std::unique_ptr<storage::RocksDbJobStore> store,
         std::unique_ptr<Access> access);

  const Config config_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<storage::RocksDbJobStore> store_;
  InstrumentedStore instrumented_store_;
  RpcMetrics rpc_metrics_;
  DeliveryMetrics delivery_metrics_;
  timer::SystemClock clock_;
  std::unique_ptr<JobService> jobs_;
  const std::unique_ptr<Access> access_;
  QuotaMetrics quota_metrics_;
  QuotaKeeper quotas_;
  std::unique_ptr<DelayQueueService> service_;
  std::unique_ptr<JsonApi> json_api_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpServer> http_server_;
  std::string grpc_address_;
  std::string http_address_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_SERVER_H_
