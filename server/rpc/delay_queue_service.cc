#include "server/rpc/delay_queue_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "grpc/support/time.h"
#include "grpcpp/security/auth_context.h"
#include "server/base/log.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_parser.h"

namespace delayd::server {

using HealthRequest = grpc::health::v1::HealthCheckRequest;
using HealthResponse = grpc::health::v1::HealthCheckResponse;

// One unary call of a raw method: requested ahead, then on arrival it
// requests the next of its method and is handled (UnaryMethod::handle); the
// handler answers it once, from any thread (Reply). Deleted once the answer
// is sent, or at once on a call that never came.
class DelayQueueService::UnaryCall final : public Tag {
 public:
  static void Request(DelayQueueService* service, const UnaryMethod* method) {
    auto* call = new UnaryCall(service, method);
    service->raw_.RequestUnary(method->index, &call->context_, &call->request_,
                               &call->writer_, service->cq_.get(), call);
  }

  void Proceed(bool ok) override {
    if (arrived_ || !ok) {  // answered, or no call came (shutting down)
      delete this;
      return;
    }
    arrived_ = true;
    if (!service_->queue_shut_) Request(service_, method_);
    service_->open_.Add();
    method_->handle(*this);
  }

  const grpc::ServerContext& context() const { return context_; }
  const grpc::ByteBuffer& request() const { return request_; }
  grpc::ByteBuffer* response() { return &response_; }

  // Sends the answer: response() with an OK status, the status alone
  // otherwise. Once, from any thread. On the polling thread it is sent
  // after the events that came together are taken (SendAnswers).
  void Reply(const grpc::Status& status) {
    if (polling == service_) {
      service_->answers_.emplace_back(this, status);
      return;
    }
    Send(status);
  }

  void Send(const grpc::Status& status) {
    DelayQueueService* const service = service_;
    if (status.ok()) {
      writer_.Finish(response_, status, this);
    } else {
      writer_.FinishWithError(status, this);
    }
    service->open_.Remove();
  }

  // The service whose queue this thread polls, if any.
  static thread_local const DelayQueueService* polling;

 private:
  UnaryCall(DelayQueueService* service, const UnaryMethod* method)
      : service_(service), method_(method), writer_(&context_) {}

  DelayQueueService* const service_;
  const UnaryMethod* const method_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer_;
  bool arrived_ = false;  // polling thread only
};

thread_local const DelayQueueService* DelayQueueService::UnaryCall::polling =
    nullptr;

namespace {

// The status health reports for `service` (Check's and Watch's request).
HealthResponse::ServingStatus HealthOf(const std::string& service,
                                       bool serving) {
  if (!service.empty() && service != DelayQueueService::kServiceName) {
    return HealthResponse::SERVICE_UNKNOWN;
  }
  return serving ? HealthResponse::SERVING : HealthResponse::NOT_SERVING;
}

}  // namespace

class DelayQueueService::HealthCheck final : public Tag {
 public:
  static void Request(DelayQueueService* service) {
    auto* call = new HealthCheck(service);
    service->health_.RequestCheck(&call->context_, &call->request_,
                                  &call->writer_, service->cq_.get(),
                                  service->cq_.get(), call);
  }

  void Proceed(bool ok) override {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    answered_ = true;
    if (!service_->queue_shut_) Request(service_);
    const HealthResponse::ServingStatus status =
        HealthOf(request_.service(), service_->Serving());
    if (status == HealthResponse::SERVICE_UNKNOWN) {
      writer_.FinishWithError(
          grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"), this);
      return;
    }
    HealthResponse response;
    response.set_status(status);
    writer_.Finish(response, grpc::Status::OK, this);
  }

 private:
  explicit HealthCheck(DelayQueueService* service)
      : service_(service), writer_(&context_) {}

  DelayQueueService* const service_;
  grpc::ServerContext context_;
  HealthRequest request_;
  grpc::ServerAsyncResponseWriter<HealthResponse> writer_;
  bool answered_ = false;
};

// One Watch stream: writes the status on arrival and on each change (the
// latest only, one write at a time). When the server drains it writes
// NOT_SERVING, then ends UNAVAILABLE; it ends CANCELLED when the client
// cancels.
class DelayQueueService::HealthWatch final
    : public AsyncStreamCall<grpc::ServerAsyncWriter<HealthResponse>,
                             HealthResponse> {
 public:
  static void Request(DelayQueueService* service) {
    auto* call = new HealthWatch(service);
    call->NotifyWhenDone();
    service->health_.RequestWatch(call->context(), &call->request_,
                                  call->stream(), service->cq_.get(),
                                  service->cq_.get(), call->arrived_tag());
  }

  // The status may have changed; `end`: the server drains, so the stream
  // ends after it is written. Any thread.
  void Update(bool serving, bool end) {
    absl::MutexLock lock(&mu_);
    wanted_ = HealthOf(request_.service(), serving);
    end_ = end_ || end;
    NextLocked();
  }

 private:
  explicit HealthWatch(DelayQueueService* service)
      : AsyncStreamCall(&service->open_), service_(service) {}

  void Arrived(bool ok) override {
    if (!ok) {
      delete this;
      return;
    }
    if (!service_->queue_shut_) Request(service_);
    absl::MutexLock lock(&service_->watchers_mu_);
    service_->watchers_.insert(this);
    registered_ = true;
    Update(service_->Serving(), service_->state_ == State::kDraining);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    NextLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    NextLocked();
  }

  void OnDone() override {
    if (registered_) {
      absl::MutexLock lock(&service_->watchers_mu_);
      service_->watchers_.erase(this);
    }
    delete this;
  }

  void NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (wanted_ != sent_ && !broken_) {
      writing_ = true;
      sent_ = wanted_;
      message_.set_status(sent_);
      StartWrite(&message_, grpc::WriteOptions());
      return;
    }
    if (end_ || broken_) {
      finished_ = true;
      Finish(broken_ ? grpc::Status(grpc::StatusCode::CANCELLED,
                                    "the watch was cancelled")
                     : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "server is shutting down"));
    }
  }

  DelayQueueService* const service_;
  HealthRequest request_;
  bool registered_ = false;  // polling thread only
  absl::Mutex mu_;
  HealthResponse message_;  // being written while writing_
  HealthResponse::ServingStatus wanted_ ABSL_GUARDED_BY(mu_) =
      HealthResponse::UNKNOWN;
  HealthResponse::ServingStatus sent_ ABSL_GUARDED_BY(mu_) =
      HealthResponse::UNKNOWN;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool end_ ABSL_GUARDED_BY(mu_) = false;     // the server drains
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

DelayQueueService::DelayQueueService(JobService* jobs, RpcMetrics* metrics,
                                     const Access* access, QuotaKeeper* quotas,
                                     int write_threads)
    : jobs_(jobs),
      metrics_(metrics),
      access_(access),
      quotas_(quotas),
      writes_(std::make_unique<WorkerPool>(write_threads, "delayd-write")),
      leases_(std::make_unique<WorkerPool>(kLeaseThreads, "delayd-lease")),
      reads_(std::make_unique<WorkerPool>(kReadThreads, "delayd-read")) {
  // Indices: the rpcs' order in delayd.proto's service DelayQueue. The
  // vector never grows after this: calls keep pointers into it.
  unary_.reserve(RawDelayQueue::kMethods);
  AddUnary(0, "Schedule", &JobService::Schedule, Pool::kWrites,
           &JobService::ScheduleAsync);
  AddUnary(1, "ScheduleBatch", &JobService::ScheduleBatch, Pool::kWrites);
  AddUnary(2, "Reschedule", &JobService::Reschedule, Pool::kWrites,
           &JobService::RescheduleAsync);
  AddUnary(3, "Cancel", &JobService::Cancel, Pool::kWrites,
           &JobService::CancelAsync);
  AddUnary(4, "CancelByPrefix", &JobService::CancelByPrefix, Pool::kWrites);
  AddUnary(5, "GetJob", &JobService::GetJob, Pool::kReads);
  AddUnary(6, "ListJobs", &JobService::ListJobs, Pool::kReads);
  AddUnary(8, "Ack", &JobService::Ack, Pool::kLeases);
  AddUnary(9, "Nack", &JobService::Nack, Pool::kLeases);
  AddUnary(10, "ExtendLease", &JobService::ExtendLease, Pool::kLeases);
  AddUnary(11, "Redrive", &JobService::Redrive, Pool::kWrites);
  AddUnary(12, "GetStats", &JobService::GetStats, Pool::kReads);
  AddUnary(13, "PreviewSchedule", &JobService::PreviewSchedule, Pool::kReads);
  AddUnary(14, "PauseJob", &JobService::PauseJob, Pool::kWrites);
  AddUnary(15, "ResumeJob", &JobService::ResumeJob, Pool::kWrites);

  subscribe_arrival_ = [this](SubscribeReactor& reactor) {
    if (!queue_shut_) {
      SubscribeReactor::Request(&raw_, cq_.get(), &open_, &jobs_->deliverer(),
                                metrics_, &subscribe_arrival_);
    }
    const v1::SubscribeRequest& request = reactor.request();
    absl::Status refusal = Refusal();
    QuotaKeeper::Ticket ticket;
    if (refusal.ok()) {
      absl::StatusOr<Caller> caller = Authenticate(reactor.call_context());
      if (!caller.ok()) {
        refusal = caller.status();
        Audit(Caller(), "Subscribe", request.topic(), refusal);
      } else {
        std::string topic;
        refusal = Authorize(*caller, request, &topic);
        if (refusal.ok()) {
          absl::StatusOr<QuotaKeeper::Ticket> admitted =
              Admit(quotas_, *caller, request);
          if (admitted.ok()) {
            ticket = *std::move(admitted);
          } else {
            refusal = admitted.status();
          }
        }
        if (!refusal.ok()) Audit(*caller, "Subscribe", topic, refusal);
      }
    }
    reactor.Begin(refusal, std::move(ticket));
  };
  stream_arrival_ = [this](ScheduleStreamReactor& reactor) {
    if (!queue_shut_) {
      ScheduleStreamReactor::Request(&raw_, cq_.get(), &open_, jobs_,
                                     writes_.get(), metrics_, quotas_,
                                     &stream_arrival_);
    }
    absl::Status refusal = Refusal();
    Caller caller;
    if (refusal.ok()) {
      if (absl::StatusOr<Caller> c = Authenticate(reactor.call_context());
          !c.ok()) {
        refusal = c.status();
        Audit(Caller(), "ScheduleStream", "", refusal);
      } else {
        caller = *std::move(c);
      }
    }
    if (!refusal.ok()) {
      metrics_->Record("ScheduleStream", static_cast<int>(refusal.code()),
                       absl::ZeroDuration());
    }
    reactor.Begin(std::move(caller), refusal);
  };
}

DelayQueueService::~DelayQueueService() { Stop(); }

void DelayQueueService::Register(grpc::ServerBuilder& builder) {
  builder.RegisterService(&raw_);
  builder.RegisterService(&health_);
  cq_ = builder.AddCompletionQueue();
}

void DelayQueueService::Start() {
  for (const UnaryMethod& method : unary_) {
    const int ahead = method.index <= 3 ? kRequestedWrites : kRequestedOthers;
    for (int i = 0; i < ahead; ++i) UnaryCall::Request(this, &method);
  }
  for (int i = 0; i < kRequestedOthers; ++i) {
    SubscribeReactor::Request(&raw_, cq_.get(), &open_, &jobs_->deliverer(),
                              metrics_, &subscribe_arrival_);
    ScheduleStreamReactor::Request(&raw_, cq_.get(), &open_, jobs_,
                                   writes_.get(), metrics_, quotas_,
                                   &stream_arrival_);
    HealthCheck::Request(this);
  }
  HealthWatch::Request(this);
  poller_ = std::thread([this] { Poll(); });
  pthread_setname_np(poller_.native_handle(), "delayd-grpc");
}

void DelayQueueService::Poll() {
  UnaryCall::polling = this;
  jobs_->GatherOnThisThread();
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    static_cast<Tag*>(tag)->Proceed(ok);
    // Then every event already there, without waiting (gpr_inf_past: with
    // "now" gRPC rounds the deadline up to its next millisecond, and waits).
    while (cq_->AsyncNext(&tag, &ok, gpr_inf_past(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      static_cast<Tag*>(tag)->Proceed(ok);
    }
    // Under --sync=none, the writes of the calls taken, as one store write,
    // then their answers; a stream answered may start its next batch,
    // written next.
    bool wrote = false;
    do {
      wrote = jobs_->WriteGathered();
      SendAnswers();
    } while (wrote);
  }
}

void DelayQueueService::SendAnswers() {
  for (auto& [call, status] : answers_) call->Send(status);
  answers_.clear();
}

void DelayQueueService::StartServing() {
  state_ = State::kServing;
  NotifyWatchers();
}

void DelayQueueService::StartDraining() {
  state_ = State::kDraining;
  NotifyWatchers();
}

void DelayQueueService::NotifyWatchers() {
  const bool serving = Serving();
  const bool end = state_ == State::kDraining;
  absl::MutexLock lock(&watchers_mu_);
  for (HealthWatch* watch : watchers_) watch->Update(serving, end);
}

void DelayQueueService::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (poller_.joinable()) {
    // Every call is over before the queue shuts down: no operation may
    // start after that (a unary answer comes from a worker or the
    // CommitQueue's thread; the grpc::Server, shut down, has cancelled the
    // rest).
    if (!open_.AwaitNone(absl::Seconds(30))) {
      DELAYD_LOG_ERROR("delayd: %d calls still open at shutdown", open_.open());
    }
    // Shut down on the polling thread, the only one that requests calls.
    stop_alarm_.Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &stop_tag_);
    poller_.join();
  } else if (cq_ != nullptr) {
    cq_->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
  }
  writes_.reset();
  leases_.reset();
  reads_.reset();
}

void DelayQueueService::ShutdownQueue(bool /*ok*/) {
  queue_shut_ = true;
  cq_->Shutdown();
}

absl::Status DelayQueueService::Refusal() const {
  switch (state_.load()) {
    case State::kServing:
      return absl::OkStatus();
    case State::kRecovering:
      return absl::UnavailableError("server is recovering; retry shortly");
    case State::kDraining:
      break;
  }
  return absl::UnavailableError("server is shutting down");
}

absl::StatusOr<Caller> DelayQueueService::Authenticate(
    const grpc::ServerContextBase& context) const {
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

template <typename Request, typename Response>
void DelayQueueService::AddUnary(
    int index, const char* name,
    absl::StatusOr<Response> (JobService::*method)(const Request&), Pool pool,
    AsyncStart<Request, Response> async) {
  unary_.push_back(
      UnaryMethod{index, [this, name, method, pool, async](UnaryCall& call) {
                    Handle(call, name, method, pool, async);
                  }});
}

template <typename Request, typename Response>
void DelayQueueService::Handle(
    UnaryCall& call, const char* name,
    absl::StatusOr<Response> (JobService::*method)(const Request&), Pool pool,
    AsyncStart<Request, Response> async) {
  const absl::Time start = absl::Now();
  // The nested lambdas capture plain pointers, not `this`: built by GCC 12
  // with -fsanitize=address,undefined, a `this` captured through two lambda
  // levels reached the worker as garbage.
  JobService* const jobs = jobs_;
  RpcMetrics* const metrics = metrics_;
  UnaryCall* const c = &call;
  auto finish = [metrics, name, start, c](absl::Status status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    metrics->Record(name, grpc_status.error_code(), absl::Now() - start);
    c->Reply(grpc_status);
  };
  if (absl::Status refusal = Refusal(); !refusal.ok()) {
    finish(refusal);
    return;
  }
  absl::StatusOr<Caller> caller = Authenticate(call.context());
  if (!caller.ok()) {
    Audit(Caller(), name, "", caller.status());
    finish(caller.status());
    return;
  }
  auto request = std::make_shared<Request>();
  if (absl::Status s = ParseRequest(call.request(), *request); !s.ok()) {
    finish(s);
    return;
  }
  std::string topic;
  if (absl::Status s = Authorize(*caller, *request, &topic); !s.ok()) {
    Audit(*caller, name, topic, s);
    finish(s);
    return;
  }
  absl::StatusOr<QuotaKeeper::Ticket> admitted =
      Admit(quotas_, *caller, *request);
  if (!admitted.ok()) {
    Audit(*caller, name, topic, admitted.status());
    finish(admitted.status());
    return;
  }
  // Shared: a task must be copyable (std::function). Most calls hold
  // nothing, and allocate nothing for it.
  std::shared_ptr<QuotaKeeper::Ticket> ticket;
  if (admitted->held()) {
    ticket = std::make_shared<QuotaKeeper::Ticket>(*std::move(admitted));
  }
  const bool audited = IsAdminMethod(name);
  grpc::ByteBuffer* const response_bytes = call.response();
  auto complete = [request, response_bytes, finish, caller = *std::move(caller),
                   name, audited, topic = std::move(topic),
                   ticket](absl::StatusOr<Response> result) {
    // The write is applied (its jobs count as live): give back what was
    // reserved before the caller can call again.
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
    if ((jobs->*async)(*request, done)) return;
  }
  auto run = [jobs, method, request, complete] {
    complete((jobs->*method)(*request));
  };
  switch (pool) {
    case Pool::kWrites:
      writes_->Run(std::move(run));
      break;
    case Pool::kLeases:
      leases_->Run(std::move(run));
      break;
    case Pool::kReads:
      reads_->Run(std::move(run));
      break;
  }
}

}  // namespace delayd::server
