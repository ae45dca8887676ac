// The server commands of delayctl: stats, health.
#include "absl/strings/str_cat.h"
#include "client/delayctl/format.h"
#include "client/delayctl/session.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace delayd::delayctl {
namespace {

Exit Stats(Session& s, const Args& a) {
  v1::GetStatsRequest request;
  if (!a.positional().empty()) request.set_topic(a.positional()[0]);
  grpc::ClientContext context;
  s.SetDeadline(context);
  v1::GetStatsResponse response;
  grpc::Status status = s.stub().GetStats(&context, request, &response);
  if (!status.ok()) return s.RpcFailed(status);
  if (s.json()) {
    s.PrintJson(response);
    return Exit::Ok();
  }
  if (response.topics().empty()) {
    s.out() << "no topics\n";
    return Exit::Ok();
  }
  std::vector<std::vector<std::string>> rows = {
      {"TOPIC", "SCHEDULED", "READY", "IN_FLIGHT", "DEAD", "SUBSCRIBERS",
       "DUE_1M", "DUE_1H", "DUE_1D"}};
  for (const v1::TopicStats& t : response.topics()) {
    rows.push_back(
        {t.topic(), absl::StrCat(t.scheduled()), absl::StrCat(t.ready()),
         absl::StrCat(t.in_flight()), absl::StrCat(t.dead()),
         absl::StrCat(t.subscribers()), absl::StrCat(t.due_next_minute()),
         absl::StrCat(t.due_next_hour()), absl::StrCat(t.due_next_day())});
  }
  s.out() << Table(rows);
  return Exit::Ok();
}

Exit Health(Session& s, const Args& a) {
  auto stub = grpc::health::v1::Health::NewStub(s.channel());
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(a.Get("service", ""));
  grpc::ClientContext context;
  s.SetDeadline(context);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return s.RpcFailed(status);
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          response.status());
  if (s.json()) {
    s.PrintJson(response);
  } else {
    s.out() << name << "\n";
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return Exit::Failed(absl::StrCat("server ", s.server(), " is ", name));
  }
  return Exit::Ok();
}

}  // namespace

std::vector<Command> ServerCommands() {
  return {
      {{"stats",
        "[TOPIC]",
        "Per-topic counts: jobs by state, subscribers, jobs due soon.",
        "",
        {},
        0,
        1},
       Stats},
      {{"health",
        "",
        "Ask grpc.health.v1 whether the server is SERVING.",
        "Exits 1 when it is not (e.g. still recovering), 3 when unreachable.\n",
        {{"service", "NAME",
          "a service name, e.g. delayd.v1.DelayQueue (default: the server)"}},
        0,
        0},
       Health},
  };
}

}  // namespace delayd::delayctl
