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
  return s.CallAndShow(
      s.stub(), &v1::DelayQueue::Stub::GetStats, request,
      [&s](const v1::GetStatsResponse& response) {
        if (response.topics().empty()) {
          s.out() << "no topics\n";
          return;
        }
        std::vector<std::vector<std::string>> rows = {
            {"TOPIC", "SCHEDULED", "READY", "IN_FLIGHT", "DEAD", "SUBSCRIBERS",
             "DUE_1M", "DUE_1H", "DUE_1D"}};
        for (const v1::TopicStats& t : response.topics()) {
          rows.push_back({t.topic(), absl::StrCat(t.scheduled()),
                          absl::StrCat(t.ready()), absl::StrCat(t.in_flight()),
                          absl::StrCat(t.dead()), absl::StrCat(t.subscribers()),
                          absl::StrCat(t.due_next_minute()),
                          absl::StrCat(t.due_next_hour()),
                          absl::StrCat(t.due_next_day())});
        }
        s.out() << Table(rows);
      });
}

Exit Health(Session& s, const Args& a) {
  using grpc::health::v1::HealthCheckResponse;
  auto stub = grpc::health::v1::Health::NewStub(s.channel());
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(a.Get("service", ""));
  return s.CallAndShow(
      *stub, &grpc::health::v1::Health::Stub::Check, request,
      [&s](const HealthCheckResponse& response) {
        s.out() << HealthCheckResponse::ServingStatus_Name(response.status())
                << "\n";
      },
      [&s](const HealthCheckResponse& response) {
        if (response.status() != HealthCheckResponse::SERVING) {
          return Exit::Failed(absl::StrCat(
              "server ", s.server(), " is ",
              HealthCheckResponse::ServingStatus_Name(response.status())));
        }
        return Exit::Ok();
      });
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
