// async_schedule: delayd's own Schedule served on gRPC's async model, an
// experiment for issue 18 (BENCHMARKS.md, "delayd's Schedule on one
// completion queue"). delayd serves every rpc on the callback API and hands
// each unary call to a worker pool. Here the same JobService, over the same
// RocksDB store, answers Schedule inline on one thread that polls one
// completion queue, the cheapest model measured (floor_unary). The
// difference to delayd is what moving the server to that model would give
// a unary Schedule.
//
// Left out: everything but Schedule, GetStats and grpc.health.v1 Check (the
// load generator's calls), auth, quotas, metrics. Jobs fire on time, to no
// subscriber. The store runs --sync=none only: under --sync=always the
// fsync would block the polling thread, which a real server must not.
//
// Usage: async_schedule ADDRESS DATA_DIR    (runs until killed)
#include <cstdio>
#include <memory>
#include <string>

#include "bench/floor/async_call.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
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

int Main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: async_schedule ADDRESS DATA_DIR\n");
    return 2;
  }
  const std::string address = argv[1];
  storage::RocksDbJobStore::Options options;
  options.sync_mode = storage::SyncMode::kNone;
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
  for (int i = 0; i < 16; ++i) {
    AsyncCall<AsyncService, v1::ScheduleRequest, v1::ScheduleResponse>::Start(
        &service, cq.get(), &AsyncService::RequestSchedule, &schedule);
  }
  AsyncCall<AsyncService, v1::GetStatsRequest, v1::GetStatsResponse>::Start(
      &service, cq.get(), &AsyncService::RequestGetStats, &stats);
  AsyncCall<HealthService, HealthRequest, HealthResponse>::Start(
      &health, cq.get(), &HealthService::RequestCheck, &serving);
  std::printf("async_schedule: listening on %s\n", address.c_str());
  std::fflush(stdout);
  PollEvents(cq.get());  // until killed
  return 0;
}

}  // namespace
}  // namespace delayd::floor

int main(int argc, char** argv) { return delayd::floor::Main(argc, argv); }
