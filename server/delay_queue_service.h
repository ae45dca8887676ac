// DelayQueueService: the gRPC handlers of delayd.v1.DelayQueue, on gRPC's
// callback API. Unary rpcs are registered as raw methods: the request bytes
// are parsed here (request_parser.h) so that even a request protobuf itself
// refuses (invalid UTF-8 in a string) gets INVALID_ARGUMENT naming the
// field. Each call is handed to the JobService on a worker thread (the logic
// may wait for an fsync; gRPC callbacks must not block), and the reactor is
// finished from there, the status converted in one place. An rpc not
// registered here answers UNIMPLEMENTED (the generated default). Subscribe
// returns a SubscribeReactor (subscribe_reactor.h), which streams what the
// Deliverer hands it.
//
// Until StartServing (recovery) and from StartDraining on, calls are refused
// with UNAVAILABLE.
// Thread-safe: gRPC calls the handlers from its own threads.
#ifndef DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_
#define DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_

#include <atomic>

#include "delayd/v1/delayd.grpc.pb.h"
#include "server/job_service.h"
#include "server/rpc_metrics.h"
#include "server/worker_pool.h"

namespace delayd::server {

class DelayQueueService final : public v1::DelayQueue::CallbackService {
 public:
  // `jobs` and `metrics` must outlive the service.
  DelayQueueService(JobService* jobs, RpcMetrics* metrics,
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
  // Registers `method` of the JobService as raw unary method `index` of the
  // service (the method's position in delayd.proto).
  template <typename Request, typename Response>
  void RegisterUnary(
      int index, const char* name,
      absl::StatusOr<Response> (JobService::*method)(const Request&));

  JobService* const jobs_;
  RpcMetrics* const metrics_;
  enum class State { kRecovering, kServing, kDraining };
  std::atomic<State> state_{State::kRecovering};
  WorkerPool pool_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_
