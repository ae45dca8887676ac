// floor_unary: the floor of one unary Schedule under each of the three
// server models of gRPC C++ (issue 18). It answers Schedule with the job
// delayd would show (floor_job.h) and GetStats with nothing, keeps nothing,
// and checks nothing: what a call costs here is what gRPC, protobuf, the
// allocator and the kernel cost, with each model's own threading.
//
//   --model=callback  the callback API, as delayd and floor_server serve:
//                     handlers run on gRPC's own callback threads;
//   --model=sync      the synchronous API: gRPC's thread pool polls its
//                     completion queues and runs each handler on the
//                     thread that took the call;
//   --model=async     completion queues of our own: --threads (2) threads,
//                     each polling its own queue with --depth (16) calls
//                     requested ahead per method, the layout of gRPC's
//                     own qps benchmark server.
//
// Every other rpc of DelayQueue is left out (callback, sync: UNIMPLEMENTED;
// async: never answered). grpc.health.v1 Check is served, for `waitready`,
// in the server's own model (see Main).
//
// Usage: floor_unary ADDRESS --model=callback|sync|async [--threads=N]
//                    [--depth=N]    (runs until killed)
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "bench/floor/async_call.h"
#include "bench/floor/floor_job.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace delayd::floor {
namespace {

constexpr int64_t kLeaseMs = 30'000;

void Answer(const v1::ScheduleRequest& request,
            v1::ScheduleResponse* response) {
  *response->mutable_job() = ReplyJob(request.job(), NowMs(), kLeaseMs);
  response->set_created(true);
}

class CallbackService final : public v1::DelayQueue::CallbackService {
 public:
  grpc::ServerUnaryReactor* Schedule(grpc::CallbackServerContext* context,
                                     const v1::ScheduleRequest* request,
                                     v1::ScheduleResponse* response) override {
    Answer(*request, response);
    return Done(context);
  }

  grpc::ServerUnaryReactor* GetStats(
      grpc::CallbackServerContext* context,
      const v1::GetStatsRequest* /*request*/,
      v1::GetStatsResponse* /*response*/) override {
    return Done(context);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

class SyncService final : public v1::DelayQueue::Service {
 public:
  grpc::Status Schedule(grpc::ServerContext* /*context*/,
                        const v1::ScheduleRequest* request,
                        v1::ScheduleResponse* response) override {
    Answer(*request, response);
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext* /*context*/,
                        const v1::GetStatsRequest* /*request*/,
                        v1::GetStatsResponse* /*response*/) override {
    return grpc::Status::OK;
  }
};

class SyncHealth final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* /*context*/,
                     const grpc::health::v1::HealthCheckRequest* /*request*/,
                     grpc::health::v1::HealthCheckResponse* response) override {
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

using AsyncService = v1::DelayQueue::AsyncService;
using HealthService = grpc::health::v1::Health::AsyncService;

const AsyncCall<AsyncService, v1::ScheduleRequest,
                v1::ScheduleResponse>::Handler kAnswer =
    [](const v1::ScheduleRequest& request, v1::ScheduleResponse* response) {
      Answer(request, response);
      return grpc::Status::OK;
    };

const AsyncCall<AsyncService, v1::GetStatsRequest,
                v1::GetStatsResponse>::Handler kNoStats =
    [](const v1::GetStatsRequest& /*request*/,
       v1::GetStatsResponse* /*response*/) { return grpc::Status::OK; };

const AsyncCall<HealthService, grpc::health::v1::HealthCheckRequest,
                grpc::health::v1::HealthCheckResponse>::Handler kServing =
    [](const grpc::health::v1::HealthCheckRequest& /*request*/,
       grpc::health::v1::HealthCheckResponse* response) {
      response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
      return grpc::Status::OK;
    };

void Poll(AsyncService* service, HealthService* health,
          grpc::ServerCompletionQueue* cq, int depth) {
  for (int i = 0; i < depth; ++i) {
    AsyncCall<AsyncService, v1::ScheduleRequest, v1::ScheduleResponse>::Start(
        service, cq, &AsyncService::RequestSchedule, &kAnswer);
  }
  AsyncCall<AsyncService, v1::GetStatsRequest, v1::GetStatsResponse>::Start(
      service, cq, &AsyncService::RequestGetStats, &kNoStats);
  AsyncCall<HealthService, grpc::health::v1::HealthCheckRequest,
            grpc::health::v1::HealthCheckResponse>::
      Start(health, cq, &HealthService::RequestCheck, &kServing);
  PollEvents(cq);
}

int Usage() {
  std::fprintf(stderr,
               "usage: floor_unary ADDRESS --model=callback|sync|async "
               "[--threads=N] [--depth=N]\n");
  return 2;
}

int Main(int argc, char** argv) {
  std::string address, model;
  int threads = 2, depth = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--model=")) {
      model = arg.substr(8);
    } else if (absl::StartsWith(arg, "--threads=")) {
      if (!absl::SimpleAtoi(arg.substr(10), &threads) || threads < 1) {
        return Usage();
      }
    } else if (absl::StartsWith(arg, "--depth=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &depth) || depth < 1) {
        return Usage();
      }
    } else if (!arg.empty() && arg[0] != '-') {
      address = arg;
    } else {
      return Usage();
    }
  }
  if (address.empty()) return Usage();
  CallbackService callback;
  SyncService sync;
  SyncHealth sync_health;
  AsyncService async;
  HealthService health;
  // gRPC's own health service is a callback service. Registered on a
  // server of the async model it took the cost of a call from 21 to 57 us
  // of CPU (likely: the callback machinery's threads poll beside ours; not
  // profiled). So the sync and async models serve grpc.health.v1 in their
  // own model.
  grpc::EnableDefaultHealthCheckService(model == "callback");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as delayd
  builder.SetMaxReceiveMessageSize(16 << 20);               // as delayd
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  if (model == "callback") {
    builder.RegisterService(&callback);
  } else if (model == "sync") {
    builder.RegisterService(&sync);
    builder.RegisterService(&sync_health);
  } else if (model == "async") {
    builder.RegisterService(&async);
    builder.RegisterService(&health);
    for (int i = 0; i < threads; ++i) {
      cqs.push_back(builder.AddCompletionQueue());
    }
  } else {
    return Usage();
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "floor_unary: cannot listen on %s\n", address.c_str());
    return 1;
  }
  if (model == "callback") {
    server->GetHealthCheckService()->SetServingStatus(true);
  }
  std::printf("floor_unary: %s model, listening on %s\n", model.c_str(),
              address.c_str());
  std::fflush(stdout);
  std::vector<std::thread> pollers;
  for (auto& cq : cqs)
    pollers.emplace_back(Poll, &async, &health, cq.get(), depth);
  server->Wait();  // until killed
  for (std::thread& t : pollers) t.join();
  return 0;
}

}  // namespace
}  // namespace delayd::floor

int main(int argc, char** argv) { return delayd::floor::Main(argc, argv); }
