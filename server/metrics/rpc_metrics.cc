#include "server/metrics/rpc_metrics.h"

#include "absl/status/status.h"

namespace delayd::server {

std::string GrpcCodeName(int code) {
  // gRPC's codes are Abseil's, number for number and name for name.
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

RpcMetrics::RpcMetrics(prometheus::Registry& registry)
    : calls_(prometheus::BuildCounter()
                 .Name("delayd_rpcs_total")
                 .Help("DelayQueue rpcs finished, by method and status code")
                 .Register(registry)),
      latency_(prometheus::BuildHistogram()
                   .Name("delayd_rpc_duration_seconds")
                   .Help("Time from receiving a DelayQueue rpc to its reply")
                   .Register(registry)) {}

void RpcMetrics::Record(const char* method, int grpc_code,
                        absl::Duration latency) {
  prometheus::Counter* counter;
  prometheus::Histogram* histogram;
  {
    absl::MutexLock lock(&mu_);
    auto it = series_.find(method);
    if (it == series_.end()) {
      static const prometheus::Histogram::BucketBoundaries kBuckets = {
          0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
      it = series_
               .try_emplace(
                   method,
                   Series{&latency_.Add({{"method", method}}, kBuckets), {}})
               .first;
    }
    Series& series = it->second;
    histogram = series.latency;
    auto code_it = series.by_code.find(grpc_code);
    if (code_it == series.by_code.end()) {
      code_it =
          series.by_code
              .try_emplace(grpc_code,
                           &calls_.Add({{"method", method},
                                        {"code", GrpcCodeName(grpc_code)}}))
              .first;
    }
    counter = code_it->second;
  }
  counter->Increment();
  histogram->Observe(absl::ToDoubleSeconds(latency));
}

}  // namespace delayd::server
