#include "server/rpc/delay_queue_service.h"

#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/security/auth_context.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_parser.h"
#include "server/rpc/schedule_stream_reactor.h"
#include "server/rpc/subscribe_reactor.h"

namespace delayd::server {

DelayQueueService::DelayQueueService(JobService* jobs, RpcMetrics* metrics,
                                     const Access* access, QuotaKeeper* quotas,
                                     int write_threads)
    : jobs_(jobs),
      metrics_(metrics),
      access_(access),
      quotas_(quotas),
      writes_(write_threads, "delayd-write"),
      leases_(kLeaseThreads, "delayd-lease"),
      reads_(kReadThreads, "delayd-read") {
  // Indices: the rpcs' order in delayd.proto's service DelayQueue.
  RegisterUnary(0, "Schedule", &JobService::Schedule, Pool::kWrites,
                &JobService::ScheduleAsync);
  RegisterUnary(1, "ScheduleBatch", &JobService::ScheduleBatch, Pool::kWrites);
  RegisterUnary(2, "Reschedule", &JobService::Reschedule, Pool::kWrites,
                &JobService::RescheduleAsync);
  RegisterUnary(3, "Cancel", &JobService::Cancel, Pool::kWrites,
                &JobService::CancelAsync);
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
  // ScheduleStream, raw bytes both ways (schedule_stream_reactor.h): its
  // batches run on the writers' pool.
  MarkMethodRawCallback(
      16,
      new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer,
                                              grpc::ByteBuffer>(
          [this](grpc::CallbackServerContext* context)
              -> grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* {
            absl::Status refusal;
            Caller caller;
            if (const State state = state_; state != State::kServing) {
              refusal = absl::UnavailableError(
                  state == State::kRecovering
                      ? "server is recovering; retry shortly"
                      : "server is shutting down");
            } else if (absl::StatusOr<Caller> c = Authenticate(*context);
                       !c.ok()) {
              refusal = c.status();
              Audit(Caller(), "ScheduleStream", "", refusal);
            } else {
              caller = *std::move(c);
            }
            if (!refusal.ok()) {
              metrics_->Record("ScheduleStream",
                               static_cast<int>(refusal.code()),
                               absl::ZeroDuration());
            }
            return new ScheduleStreamReactor(jobs_, &writes_, metrics_, quotas_,
                                             std::move(caller), refusal);
          }));
}

absl::StatusOr<Caller> DelayQueueService::Authenticate(
    const grpc::CallbackServerContext& context) const {
  if (access_ == nullptr || access_->open()) return Caller();
  Credentials credentials;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    credentials.authorization.emplace(it->second.data(), it->second.size());
  }
  // Over mutual TLS gRPC verified the certificate before the call began.
  std::shared_ptr<const grpc::AuthContext> peer = context.auth_context();
  if (peer != nullptr && peer->IsPeerAuthenticated()) {
    for (const char* property :
         {"x509_subject_alternative_name", "x509_common_name"}) {
      for (const grpc::string_ref& value : peer->FindPropertyValues(property)) {
        credentials.identities.emplace_back(value.data(), value.size());
      }
    }
  }
  return access_->Authenticate(credentials);
}

grpc::ServerWriteReactor<v1::SubscribeResponse>* DelayQueueService::Subscribe(
    grpc::CallbackServerContext* context, const v1::SubscribeRequest* request) {
  absl::Status refusal;
  QuotaKeeper::Ticket ticket;
  if (const State state = state_; state != State::kServing) {
    refusal = absl::UnavailableError(state == State::kRecovering
                                         ? "server is recovering; retry shortly"
                                         : "server is shutting down");
  } else if (absl::StatusOr<Caller> caller = Authenticate(*context);
             !caller.ok()) {
    refusal = caller.status();
    Audit(Caller(), "Subscribe", request->topic(), refusal);
  } else {
    std::string topic;
    refusal = Authorize(*caller, *request, &topic);
    if (refusal.ok()) {
      absl::StatusOr<QuotaKeeper::Ticket> admitted =
          Admit(quotas_, *caller, *request);
      if (admitted.ok()) {
        ticket = *std::move(admitted);
      } else {
        refusal = admitted.status();
      }
    }
    if (!refusal.ok()) Audit(*caller, "Subscribe", topic, refusal);
  }
  return new SubscribeReactor(&jobs_->deliverer(), metrics_, *request, refusal,
                              std::move(ticket));
}

template <typename Request, typename Response>
void DelayQueueService::RegisterUnary(
    int index, const char* name,
    absl::StatusOr<Response> (JobService::*method)(const Request&), Pool pool,
    AsyncStart<Request, Response> async) {
  MarkMethodRawCallback(
      index,
      new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          [this, name, method, pool, async](
              grpc::CallbackServerContext* context,
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
            absl::StatusOr<Caller> caller = Authenticate(*context);
            if (!caller.ok()) {
              Audit(Caller(), name, "", caller.status());
              finish(caller.status());
              return reactor;
            }
            auto request = std::make_shared<Request>();
            if (absl::Status s = ParseRequest(*request_bytes, *request);
                !s.ok()) {
              finish(s);
              return reactor;
            }
            std::string topic;
            if (absl::Status s = Authorize(*caller, *request, &topic);
                !s.ok()) {
              Audit(*caller, name, topic, s);
              finish(s);
              return reactor;
            }
            absl::StatusOr<QuotaKeeper::Ticket> admitted =
                Admit(quotas_, *caller, *request);
            if (!admitted.ok()) {
              Audit(*caller, name, topic, admitted.status());
              finish(admitted.status());
              return reactor;
            }
            // Shared: a task must be copyable (std::function). Most calls
            // hold nothing, and allocate nothing for it.
            std::shared_ptr<QuotaKeeper::Ticket> ticket;
            if (admitted->held()) {
              ticket =
                  std::make_shared<QuotaKeeper::Ticket>(*std::move(admitted));
            }
            const bool audited = IsAdminMethod(name);
            auto complete = [request, response_bytes, finish,
                             caller = *std::move(caller), name, audited,
                             topic = std::move(topic),
                             ticket](absl::StatusOr<Response> result) {
              // The write is applied (its jobs count as live): give back
              // what was reserved before the caller can call again.
              if (ticket != nullptr) *ticket = QuotaKeeper::Ticket();
              if (result.ok()) {
                Restrict(caller, *request, &*result);
                SerializeResponse(*result, *response_bytes);
              }
              if (audited) Audit(caller, name, topic, result.status());
              finish(result.status());
            };
            if (async != nullptr) {
              // Started here if it need not wait; then finished from the
              // CommitQueue's thread after its write.
              absl::AnyInvocable<void(absl::StatusOr<Response>)&&> done =
                  [complete](absl::StatusOr<Response> result) {
                    complete(std::move(result));
                  };
              if ((jobs->*async)(*request, done)) return reactor;
            }
            auto call = [jobs, method, request, complete] {
              complete((jobs->*method)(*request));
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
