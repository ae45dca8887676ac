// DelayQueueService: the gRPC handlers of delayd.v1.DelayQueue, on gRPC's
// callback API. Unary rpcs are registered as raw methods: the request bytes
// are parsed here (request_parser.h) so that even a request protobuf itself
// refuses (invalid UTF-8 in a string) gets INVALID_ARGUMENT naming the
// field. A call that may wait for an fsync (a synced write under
// --sync=always) or run long (batches, prefix scans, ListJobs, GetStats) is
// handed to the JobService on a worker thread, since gRPC callbacks must not
// block; the others (Ack, Nack, ExtendLease, GetJob, and single-job writes
// under --sync=none) run on gRPC's callback thread, which saves two thread
// hand-offs per call. Either way the reactor is finished with the status
// converted in one place. An rpc not
// registered here answers UNIMPLEMENTED (the generated default). Subscribe
// returns a SubscribeReactor (subscribe_reactor.h), which streams what the
// Deliverer hands it.
//
// Until StartServing (recovery) and from StartDraining on, calls are refused
// with UNAVAILABLE.
// Thread-safe: gRPC calls the handlers from its own threads.
#ifndef DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
#define DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_

#include <atomic>

#include "delayd/v1/delayd.grpc.pb.h"
#include "server/core/job_service.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/worker_pool.h"

namespace delayd::server {

class DelayQueueService final : public v1::DelayQueue::CallbackService {
 public:
  // `jobs` and `metrics` must outlive the service. `synced_writes`: whether
  // Schedule, Reschedule and Cancel wait for an fsync (--sync=always).
  DelayQueueService(JobService* jobs, RpcMetrics* metrics, bool synced_writes,
                    int worker_threads = 16);
  DelayQueueService(const DelayQueueService&) = delete;
  DelayQueueService& operator=(const DelayQueueService&) = delete;

  void StartServing() { state_ = State::kServing; }
  // From now on, new calls answer UNAVAILABLE.
  void StartDraining() { state_ = State::kDraining; }

  grpc::ServerWriteReactor<v1::Delivery>* Subscribe(
      grpc::CallbackServerContext* context,
      const v1::SubscribeRequest* request) override;

 private:
  // Where a call runs (see the class comment).
  enum class Run { kInline, kOnWorker };
  // Registers `method` of the JobService as raw unary method `index` of the
  // service (the method's position in delayd.proto).
  template <typename Request, typename Response>
  void RegisterUnary(
      int index, const char* name,
      absl::StatusOr<Response> (JobService::*method)(const Request&), Run run);

  JobService* const jobs_;
  RpcMetrics* const metrics_;
  enum class State { kRecovering, kServing, kDraining };
  std::atomic<State> state_{State::kRecovering};
  WorkerPool pool_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
