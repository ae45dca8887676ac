#include "server/metrics/instrumented_store.h"

#include "absl/time/clock.h"
#include "server/metrics/rpc_metrics.h"

namespace delayd::server {
namespace {

prometheus::Family<prometheus::Histogram>& LatencyFamily(
    prometheus::Registry& registry) {
  return prometheus::BuildHistogram()
      .Name("delayd_store_write_duration_seconds")
      .Help(
          "Time of one store write (one RocksDB WriteBatch), by whether "
          "its write-ahead log was synced")
      .Register(registry);
}

const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
      0.005,   0.01,   0.025,   0.05,   0.1,   1};
  return kBuckets;
}

}  // namespace

InstrumentedStore::InstrumentedStore(storage::JobStore* store,
                                     prometheus::Registry& registry)
    : store_(store),
      synced_latency_(
          LatencyFamily(registry).Add({{"sync", "true"}}, Buckets())),
      unsynced_latency_(
          LatencyFamily(registry).Add({{"sync", "false"}}, Buckets())),
      failures_(prometheus::BuildCounter()
                    .Name("delayd_store_write_failures_total")
                    .Help("Store writes that failed (nothing was written), by "
                          "the status code returned to the caller")
                    .Register(registry)) {}

absl::Status InstrumentedStore::Apply(
    std::span<const storage::Mutation> mutations,
    storage::Durability durability) {
  if (mutations.empty()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    // Resume may take a while: not on a caller that must not wait.
    if (out_of_space_ && durability == storage::Durability::kSyncNoStall) {
      return storage::WouldStallError();
    }
    if (out_of_space_ && start - last_resume_ >= absl::Seconds(1)) {
      last_resume_ = start;
      out_of_space_ = !store_->Resume().ok();
    }
  }
  absl::Status status = store_->Apply(mutations, durability);
  if (storage::IsWouldStall(status)) return status;  // nothing was tried
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (durability != storage::Durability::kNoSync ? synced_latency_
                                              : unsynced_latency_)
      .Observe(seconds);
  if (!status.ok()) {
    const int code = static_cast<int>(status.code());
    prometheus::Counter* counter;
    {
      absl::MutexLock lock(&mu_);
      if (status.code() == absl::StatusCode::kResourceExhausted) {
        out_of_space_ = true;
      }
      auto it = failures_by_code_.find(code);
      if (it == failures_by_code_.end()) {
        it = failures_by_code_
                 .try_emplace(code,
                              &failures_.Add({{"code", GrpcCodeName(code)}}))
                 .first;
      }
      counter = it->second;
    }
    counter->Increment();
  }
  return status;
}

}  // namespace delayd::server
