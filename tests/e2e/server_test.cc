// End to end: the real delayd binary on free loopback ports — health,
// reflection, clean shutdown on SIGTERM/SIGINT, refusal of bad flags.
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/poll.h"
#include "tests/support/rpc_deadline.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::grpc::reflection::v1alpha::ServerReflection;
using ::grpc::reflection::v1alpha::ServerReflectionRequest;
using ::grpc::reflection::v1alpha::ServerReflectionResponse;

HealthCheckResponse::ServingStatus CheckHealth(const DelaydProcess& server,
                                               const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(server.NewChannel());
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// One request/response exchange on the reflection stream.
ServerReflectionResponse Reflect(const DelaydProcess& server,
                                 const ServerReflectionRequest& request) {
  auto stub = ServerReflection::NewStub(server.NewChannel());
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);
  EXPECT_TRUE(stream->Write(request));
  stream->WritesDone();
  ServerReflectionResponse response;
  EXPECT_TRUE(stream->Read(&response));
  while (stream->Read(nullptr)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
  return response;
}

TEST(ServerTest, HealthAnswersServing) {
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  EXPECT_EQ(CheckHealth(*server, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(*server, "delayd.v1.DelayQueue"),
            HealthCheckResponse::SERVING);
}

// Recurring jobs' occurrences follow the zone rules: a start stamps the
// data dir with the tzdata version it computed them with, so that the next
// start knows whether to compute them again (the unit tests in
// job_service_recurring_test cover the recomputation itself).
TEST(ServerTest, StartStampsTheTzdataVersionInTheDataDir) {
  std::ifstream zi("/usr/share/zoneinfo/tzdata.zi");
  std::string version;
  ASSERT_TRUE(std::getline(zi, version)) << "tzdata is not installed";
  absl::string_view v = version;
  ASSERT_TRUE(absl::ConsumePrefix(&v, "# version ")) << version;
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  std::ifstream stamp(server->data_dir() + "/TZDATA");
  std::string stamped;
  ASSERT_TRUE(std::getline(stamp, stamped));
  EXPECT_EQ(stamped, v);
}

TEST(ServerTest, ReflectionListsTheServices) {
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  ServerReflectionRequest request;
  request.set_list_services("");
  const ServerReflectionResponse response = Reflect(*server, request);
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "delayd.v1.DelayQueue"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"),
            names.end());
}

TEST(ServerTest, ReflectionDescribesEveryRpc) {
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  ServerReflectionRequest request;
  request.set_file_containing_symbol("delayd.v1.DelayQueue");
  const ServerReflectionResponse response = Reflect(*server, request);
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(),
            1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(
      response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "delayd.v1");
  ASSERT_EQ(file.service_size(), 1);
  // Reflection must describe what this binary serves: the compiled-in
  // service descriptor.
  const google::protobuf::ServiceDescriptor* compiled =
      delayd::v1::Job::descriptor()->file()->FindServiceByName("DelayQueue");
  ASSERT_NE(compiled, nullptr);
  ASSERT_EQ(file.service(0).method_size(), compiled->method_count());
  for (int i = 0; i < compiled->method_count(); ++i) {
    EXPECT_EQ(file.service(0).method(i).name(), compiled->method(i)->name());
  }
}

TEST(ServerTest, LimitFlagsTakeEffect) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       DelaydProcess::Start({"--max-payload-bytes=10"}));
  auto stub = delayd::v1::DelayQueue::NewStub(server->NewChannel());
  delayd::v1::ScheduleRequest request;
  request.mutable_job()->set_topic("t");
  request.mutable_job()->set_id("small");
  request.mutable_job()->set_payload("0123456789");
  delayd::v1::ScheduleResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Schedule(&context, request, &response).ok());
  }
  request.mutable_job()->set_id("big");
  request.mutable_job()->set_payload("0123456789a");
  grpc::ClientContext context;
  const grpc::Status status = stub->Schedule(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(
      status.error_message().find("job.payload: must be at most 10 bytes"),
      std::string::npos)
      << status.error_message();
}

TEST(ServerTest, SigtermDrainsAndExitsZero) {
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  server->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, server->Wait());
  EXPECT_EQ(code, 0) << server->Log();
}

TEST(ServerTest, SigintExitsZero) {
  ASSERT_OK_AND_ASSIGN(auto server, DelaydProcess::Start());
  server->Signal(SIGINT);
  ASSERT_OK_AND_ASSIGN(int code, server->Wait());
  EXPECT_EQ(code, 0) << server->Log();
}

TEST(ServerTest, BadFlagValueIsRefusedNamingTheFlag) {
  auto server = DelaydProcess::Start({"--sync=sometimes"});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(
      server.status().message().find("--sync: must be 'always' or 'none'"),
      std::string::npos)
      << server.status();
}

// With a 1 s memory horizon, a job due 3 s ahead starts on disk only and
// still fires (counted READY, no subscriber) once its time comes, not
// before. A horizon under 1 s is refused naming the flag.
TEST(ServerTest, MemoryHorizonLoadsJobsAsItAdvances) {
  auto refused = DelaydProcess::Start({"--memory-horizon=500ms"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "--memory_horizon: must be 0 (off) or between 1s and 8760h"),
            std::string::npos)
      << refused.status();

  ASSERT_OK_AND_ASSIGN(auto server,
                       DelaydProcess::Start({"--memory-horizon=1s"}));
  auto stub = delayd::v1::DelayQueue::NewStub(server->NewChannel());
  auto ready = [&] {
    delayd::v1::GetStatsRequest request;
    request.set_topic("h");
    delayd::v1::GetStatsResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(stub->GetStats(&context, request, &response).ok());
    return response.topics_size() == 1 ? response.topics(0).ready() : 0;
  };
  delayd::v1::ScheduleRequest request;
  request.mutable_job()->set_topic("h");
  request.mutable_job()->set_id("later");
  request.mutable_job()->mutable_delay()->set_seconds(3);
  delayd::v1::ScheduleResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Schedule(&context, request, &response).ok());
  }
  const absl::Time due = FromProto(response.job().fire_at());
  PollUntil([&] { return ready() != 0; }, due + absl::Seconds(30) - absl::Now(),
            absl::Milliseconds(20));
  const absl::Time seen = absl::Now();
  EXPECT_EQ(ready(), 1u);
  EXPECT_GE(seen, due);  // never early
}

// An unbounded duration overflowed the time arithmetic: --memory-horizon=inf
// armed nothing (no job ever fired), --max-schedule-ahead=inf refused every
// fire_at. Each is refused at start now, naming the flag and its range.
TEST(ServerTest, InfiniteDurationFlagsAreRefusedNamingTheFlag) {
  for (const char* flag : {"memory_horizon", "max_schedule_ahead",
                           "shutdown_grace", "retention"}) {
    auto server = DelaydProcess::Start({absl::StrCat("--", flag, "=inf")});
    ASSERT_FALSE(server.ok()) << flag;
    EXPECT_NE(
        server.status().message().find(absl::StrCat("--", flag, ": must be ")),
        std::string::npos)
        << server.status();
    EXPECT_NE(server.status().message().find("got inf"), std::string::npos)
        << server.status();
  }
}

// A second delayd on a port another one serves is refused, naming --listen.
// gRPC sets SO_REUSEPORT on its listening sockets by default, so the second
// bound the port too and the kernel split the connections between the two
// processes (and their separate stores). With port 0 that happened by
// chance: two servers of tests running side by side got the same port, and
// a client reached the other test's server as it shut down (UNAVAILABLE):
// DelayctlTest.ListFollowsPagesWithFiltersAndLimit failed that way on fresh
// machines.
TEST(ServerTest, ASecondServerOnTheSamePortIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto first, DelaydProcess::Start());
  auto second = DelaydProcess::Start({"--listen=" + first->grpc_address()});
  ASSERT_FALSE(second.ok()) << "started on " << (*second)->grpc_address();
  EXPECT_NE(second.status().message().find("--listen: cannot serve gRPC on"),
            std::string::npos)
      << second.status();
}

// Likewise the HTTP port: CivetWeb's socket has SO_REUSEADDR only, so a
// port another delayd listens on cannot be bound, and the start says which
// flag.
TEST(ServerTest, AnHttpPortAnotherServerServesIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto first, DelaydProcess::Start());
  auto second =
      DelaydProcess::Start({"--http-listen=" + first->http_address()});
  ASSERT_FALSE(second.ok()) << "started on " << (*second)->http_address();
  EXPECT_NE(
      second.status().message().find("--http-listen: cannot serve HTTP on"),
      std::string::npos)
      << second.status();
}

// At the largest memory horizon and schedule-ahead allowed, a job given by
// delay and one given by fire_at both fire (READY, no subscriber).
TEST(ServerTest, JobsFireUnderTheLargestHorizonAndScheduleAhead) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       DelaydProcess::Start({"--memory-horizon=8760h",
                                             "--max-schedule-ahead=876600h"}));
  auto stub = delayd::v1::DelayQueue::NewStub(server->NewChannel());
  delayd::v1::ScheduleRequest request;
  request.mutable_job()->set_topic("h");
  request.mutable_job()->set_id("by-delay");
  request.mutable_job()->mutable_delay()->set_nanos(300'000'000);
  delayd::v1::ScheduleResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->Schedule(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  request.mutable_job()->set_id("by-fire-at");
  *request.mutable_job()->mutable_fire_at() =
      ToProto(absl::Now() + absl::Milliseconds(300));
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->Schedule(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  auto ready = [&] {
    delayd::v1::GetStatsRequest stats;
    stats.set_topic("h");
    delayd::v1::GetStatsResponse reply;
    grpc::ClientContext context;
    EXPECT_TRUE(stub->GetStats(&context, stats, &reply).ok());
    return reply.topics_size() == 1 ? reply.topics(0).ready() : 0;
  };
  PollUntil([&] { return ready() == 2; }, absl::Seconds(30),
            absl::Milliseconds(20));
  EXPECT_EQ(ready(), 2u) << server->Log();
}

TEST(ServerTest, ConfigFileAndEnvironmentAreRead) {
  const std::string dir = MakeTempDir();
  {
    std::FILE* f = std::fopen((dir + "/delayd.conf").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "# a bad value the command line does not override\nsync = never\n", f);
    std::fclose(f);
  }
  auto server = DelaydProcess::Start({"--config=" + dir + "/delayd.conf"}, dir);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("got 'never'"), std::string::npos)
      << server.status();
}

}  // namespace
}  // namespace delayd::testing
