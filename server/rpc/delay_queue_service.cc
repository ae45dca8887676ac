#include "server/rpc/delay_queue_service.h"

#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_parser.h"
#include "server/rpc/subscribe_reactor.h"

namespace delayd::server {

DelayQueueService::DelayQueueService(JobService* jobs, RpcMetrics* metrics,
                                     int write_threads)
    : jobs_(jobs),
      metrics_(metrics),
      writes_(write_threads, "delayd-write"),
      leases_(kLeaseThreads, "delayd-lease"),
      reads_(kReadThreads, "delayd-read") {
  // Indices: the rpcs' order in delayd.proto's service DelayQueue.
  RegisterUnary(0, "Schedule", &JobService::Schedule, Pool::kWrites);
  RegisterUnary(1, "ScheduleBatch", &JobService::ScheduleBatch, Pool::kWrites);
  RegisterUnary(2, "Reschedule", &JobService::Reschedule, Pool::kWrites);
  RegisterUnary(3, "Cancel", &JobService::Cancel, Pool::kWrites);
  RegisterUnary(4, "CancelByPrefix", &JobService::CancelByPrefix,
                Pool::kWrites);
  RegisterUnary(5, "GetJob", &JobService::GetJob, Pool::kReads);
  RegisterUnary(6, "ListJobs", &JobService::ListJobs, Pool::kReads);
  RegisterUnary(8, "Ack", &JobService::Ack, Pool::kLeases);
  RegisterUnary(9, "Nack", &JobService::Nack, Pool::kLeases);
  RegisterUnary(10, "ExtendLease", &JobService::ExtendLease, Pool::kLeases);
  RegisterUnary(11, "Redrive", &JobService::Redrive, Pool::kWrites);
  RegisterUnary(12, "GetStats", &JobService::GetStats, Pool::kReads);
  RegisterUnary(13, "PreviewSchedule", &JobService::PreviewSchedule,
                Pool::kReads);
  RegisterUnary(14, "PauseJob", &JobService::PauseJob, Pool::kWrites);
  RegisterUnary(15, "ResumeJob", &JobService::ResumeJob, Pool::kWrites);
}

grpc::ServerWriteReactor<v1::SubscribeResponse>* DelayQueueService::Subscribe(
    grpc::CallbackServerContext* /*context*/,
    const v1::SubscribeRequest* request) {
  absl::Status refusal;
  if (const State state = state_; state != State::kServing) {
    refusal = absl::UnavailableError(state == State::kRecovering
                                         ? "server is recovering; retry shortly"
                                         : "server is shutting down");
  }
  return new SubscribeReactor(&jobs_->deliverer(), metrics_, *request, refusal);
}

template <typename Request, typename Response>
void DelayQueueService::RegisterUnary(
    int index, const char* name,
    absl::StatusOr<Response> (JobService::*method)(const Request&), Pool pool) {
  MarkMethodRawCallback(
      index,
      new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          [this, name, method, pool](grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes) {
            const absl::Time start = absl::Now();
            grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
            // The nested lambdas capture plain pointers, not `this`: built
            // by GCC 12 with -fsanitize=address,undefined, a `this` captured
            // through two lambda levels reached the worker as garbage.
            JobService* const jobs = jobs_;
            RpcMetrics* const metrics = metrics_;
            auto finish = [metrics, name, start, reactor](absl::Status status) {
              const grpc::Status grpc_status = ToGrpcStatus(status);
              metrics->Record(name, grpc_status.error_code(),
                              absl::Now() - start);
              reactor->Finish(grpc_status);
            };
            if (const State state = state_; state != State::kServing) {
              finish(absl::UnavailableError(
                  state == State::kRecovering
                      ? "server is recovering; retry shortly"
                      : "server is shutting down"));
              return reactor;
            }
            auto request = std::make_shared<Request>();
            if (absl::Status s = ParseRequest(*request_bytes, *request);
                !s.ok()) {
              finish(s);
              return reactor;
            }
            auto call = [jobs, method, request, response_bytes, finish] {
              absl::StatusOr<Response> result = (jobs->*method)(*request);
              if (result.ok()) SerializeResponse(*result, *response_bytes);
              finish(result.status());
            };
            switch (pool) {
              case Pool::kWrites:
                writes_.Run(std::move(call));
                break;
              case Pool::kLeases:
                leases_.Run(std::move(call));
                break;
              case Pool::kReads:
                reads_.Run(std::move(call));
                break;
            }
            return reactor;
          }));
}

}  // namespace delayd::server
