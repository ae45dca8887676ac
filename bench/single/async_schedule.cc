// async_schedule: delayd's own Schedule served on gRPC's async model, an
// experiment for issue 18 (BENCHMARKS.md, "delayd's Schedule on one
// completion queue"). delayd serves every rpc on the callback API and hands
// each unary call to a worker pool. Here the same JobService, over the same
// RocksDB store, answers Schedule inline on one thread that polls one
// completion queue, the cheapest model measured (floor_unary). The
// difference to delayd is what moving the server to that model would give
// a unary Schedule.
//
// With --batch, the Schedule calls are not answered one by one: after each
// event, the thread takes every other event already on the queue (without
// waiting), and then answers all the Schedules that came with one
// JobService::Stream, as a ScheduleStream's run: one store write, and
// under --sync=always one fsync, for the run. Each call still gets exactly
// its own unary answer. The polling thread is then the group commit's
// leader: while it syncs, the next calls gather on the queue.
//
// Left out: everything but Schedule, GetStats and grpc.health.v1 Check (the
// load generator's calls), auth, quotas, metrics. Jobs fire on time, to no
// subscriber. Without --batch, --sync=always would sync each call on the
// one polling thread; it is refused.
//
// Usage: async_schedule ADDRESS DATA_DIR [--batch [--sync=always]]
//        (--sync=none by default; runs until killed)
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/floor/async_call.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/support/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/core/job_service.h"
#include "server/jobs/limits.h"
#include "server/rpc/grpc_status.h"
#include "server/timer/clock.h"
#include "storage/rocksdb_job_store.h"

namespace delayd::floor {
namespace {

using server::JobService;
using server::Limits;
using server::ToGrpcStatus;
using AsyncService = v1::DelayQueue::AsyncService;
using HealthService = grpc::health::v1::Health::AsyncService;
using HealthRequest = grpc::health::v1::HealthCheckRequest;
using HealthResponse = grpc::health::v1::HealthCheckResponse;

// A call's answer from a JobService result.
template <typename Response>
grpc::Status Reply(absl::StatusOr<Response> result, Response* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

// A Schedule call of --batch: it waits in `pending` until the poller
// answers the calls that came together (Answer).
class ScheduleCall final : public Event {
 public:
  static void Start(AsyncService* service, grpc::ServerCompletionQueue* cq,
                    std::vector<ScheduleCall*>* pending) {
    auto* call = new ScheduleCall(service, cq, pending);
    service->RequestSchedule(&call->context_, call->request_.mutable_schedule(),
                             &call->writer_, cq, cq, call);
  }

  void Proceed(bool ok) override {
    if (!ok || answered_) {  // shutting down, or the answer is sent
      delete this;
      return;
    }
    Start(service_, cq_, pending_);
    pending_->push_back(this);
  }

  const v1::StreamRequest& request() const { return request_; }

  void Answer(v1::StreamAnswer& answer) {
    answered_ = true;
    if (answer.code() != 0) {
      writer_.FinishWithError(
          grpc::Status(static_cast<grpc::StatusCode>(answer.code()),
                       answer.message()),
          this);
      return;
    }
    response_ = std::move(*answer.mutable_schedule());
    writer_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  ScheduleCall(AsyncService* service, grpc::ServerCompletionQueue* cq,
               std::vector<ScheduleCall*>* pending)
      : service_(service), cq_(cq), pending_(pending), writer_(&context_) {}

  AsyncService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  std::vector<ScheduleCall*>* const pending_;
  grpc::ServerContext context_;
  v1::StreamRequest request_;  // its schedule, as it came
  v1::ScheduleResponse response_;
  grpc::ServerAsyncResponseWriter<v1::ScheduleResponse> writer_;
  bool answered_ = false;
};

// --batch's polling loop: one event (waiting for it), then every event
// ready now, then the Schedules that came, answered together. The
// deadline of the calls that do not wait is gpr_inf_past: with "now",
// gRPC rounds it up to its next millisecond and each call waited about
// 1.6 ms for nothing (4.2k calls/s instead of 24.5k).
void PollBatched(grpc::ServerCompletionQueue* cq, JobService* jobs,
                 std::vector<ScheduleCall*>* pending) {
  void* tag = nullptr;
  bool ok = false;
  std::vector<const v1::StreamRequest*> requests;
  while (cq->Next(&tag, &ok)) {
    static_cast<Event*>(tag)->Proceed(ok);
    while (cq->AsyncNext(&tag, &ok, gpr_inf_past(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      static_cast<Event*>(tag)->Proceed(ok);
    }
    if (pending->empty()) continue;
    requests.clear();
    for (const ScheduleCall* call : *pending) {
      requests.push_back(&call->request());
    }
    std::vector<v1::StreamAnswer> answers = jobs->Stream(requests);
    for (size_t i = 0; i < pending->size(); ++i) {
      (*pending)[i]->Answer(answers[i]);
    }
    pending->clear();
  }
}

int Main(int argc, char** argv) {
  const bool batch = argc >= 4 && std::string(argv[3]) == "--batch";
  const bool sync = argc == 5 && std::string(argv[4]) == "--sync=always";
  if (argc < 3 || argc > 5 || (argc >= 4 && !batch) || (argc == 5 && !sync)) {
    std::fprintf(stderr,
                 "usage: async_schedule ADDRESS DATA_DIR "
                 "[--batch [--sync=always]]\n");
    return 2;
  }
  const std::string address = argv[1];
  storage::RocksDbJobStore::Options options;
  options.sync_mode =
      sync ? storage::SyncMode::kAlways : storage::SyncMode::kNone;
  absl::StatusOr<std::unique_ptr<storage::RocksDbJobStore>> store =
      storage::RocksDbJobStore::Open(argv[2], options);
  if (!store.ok()) {
    std::fprintf(stderr, "async_schedule: %s\n",
                 store.status().ToString().c_str());
    return 1;
  }
  timer::SystemClock clock;
  JobService jobs(store->get(), &clock, Limits());
  if (absl::Status s = jobs.Recover().status(); !s.ok()) {
    std::fprintf(stderr, "async_schedule: %s\n", s.ToString().c_str());
    return 1;
  }
  jobs.Start();

  const AsyncCall<AsyncService, v1::ScheduleRequest,
                  v1::ScheduleResponse>::Handler schedule =
      [&jobs](const v1::ScheduleRequest& request,
              v1::ScheduleResponse* response) {
        return Reply(jobs.Schedule(request), response);
      };
  const AsyncCall<AsyncService, v1::GetStatsRequest,
                  v1::GetStatsResponse>::Handler stats =
      [&jobs](const v1::GetStatsRequest& request,
              v1::GetStatsResponse* response) {
        return Reply(jobs.GetStats(request), response);
      };
  const AsyncCall<HealthService, HealthRequest, HealthResponse>::Handler
      serving = [](const HealthRequest& /*request*/, HealthResponse* response) {
        response->set_status(HealthResponse::SERVING);
        return grpc::Status::OK;
      };

  // No callback service on this server (so not gRPC's default health
  // service): one would bring threads that poll beside ours.
  grpc::EnableDefaultHealthCheckService(false);
  AsyncService service;
  HealthService health;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as delayd
  builder.SetMaxReceiveMessageSize(16 << 20);               // as delayd
  builder.RegisterService(&service);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::ServerCompletionQueue> cq =
      builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "async_schedule: cannot listen on %s\n",
                 address.c_str());
    return 1;
  }
  std::vector<ScheduleCall*> pending;
  for (int i = 0; i < 16; ++i) {
    if (batch) {
      ScheduleCall::Start(&service, cq.get(), &pending);
    } else {
      AsyncCall<AsyncService, v1::ScheduleRequest, v1::ScheduleResponse>::Start(
          &service, cq.get(), &AsyncService::RequestSchedule, &schedule);
    }
  }
  AsyncCall<AsyncService, v1::GetStatsRequest, v1::GetStatsResponse>::Start(
      &service, cq.get(), &AsyncService::RequestGetStats, &stats);
  AsyncCall<HealthService, HealthRequest, HealthResponse>::Start(
      &health, cq.get(), &HealthService::RequestCheck, &serving);
  std::printf("async_schedule: listening on %s\n", address.c_str());
  std::fflush(stdout);
  if (batch) {
    PollBatched(cq.get(), &jobs, &pending);  // until killed
  } else {
    PollEvents(cq.get());  // until killed
  }
  return 0;
}

}  // namespace
}  // namespace delayd::floor

int main(int argc, char** argv) { return delayd::floor::Main(argc, argv); }
