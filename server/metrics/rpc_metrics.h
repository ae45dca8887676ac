// RpcMetrics: per-rpc counters and latency histograms of the DelayQueue
// service — delayd_rpcs_total{method,code} and
// delayd_rpc_duration_seconds{method}. Series are created on first use.
// Thread-safe.
#ifndef DELAYD_SERVER_METRICS_RPC_METRICS_H_
#define DELAYD_SERVER_METRICS_RPC_METRICS_H_

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace delayd::server {

class RpcMetrics {
 public:
  explicit RpcMetrics(prometheus::Registry& registry);
  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  // `method` must be a string literal (it is kept by pointer).
  void Record(const char* method, int grpc_code, absl::Duration latency);

 private:
  struct Series {
    prometheus::Histogram* latency;
    absl::flat_hash_map<int, prometheus::Counter*> by_code;
  };

  prometheus::Family<prometheus::Counter>& calls_;
  prometheus::Family<prometheus::Histogram>& latency_;
  absl::Mutex mu_;
  absl::flat_hash_map<const char*, Series> series_ ABSL_GUARDED_BY(mu_);
};

// The name Prometheus shows for a gRPC status code, e.g. "NOT_FOUND".
std::string GrpcCodeName(int code);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_RPC_METRICS_H_
