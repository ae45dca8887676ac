#include "bench/delayd-bench/server_stats.h"

#include <chrono>

#include "grpcpp/client_context.h"

namespace delayd::bench {

ServerCounts GetCounts(v1::DelayQueue::Stub& stub, const Endpoint& endpoint,
                       const std::string& topic, int deadline_ms) {
  ServerCounts c;
  grpc::ClientContext context;
  Authorize(endpoint, &context);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(deadline_ms));
  v1::GetStatsRequest request;
  request.set_topic(topic);
  v1::GetStatsResponse response;
  const grpc::Status status = stub.GetStats(&context, request, &response);
  if (!status.ok()) {
    c.error =
        std::to_string(status.error_code()) + ": " + status.error_message();
    return c;
  }
  c.ok = true;
  for (const v1::TopicStats& t : response.topics()) {
    c.scheduled += static_cast<int64_t>(t.scheduled());
    c.ready += static_cast<int64_t>(t.ready());
    c.in_flight += static_cast<int64_t>(t.in_flight());
    c.dead += static_cast<int64_t>(t.dead());
    c.subscribers += t.subscribers();
  }
  c.jobs = c.scheduled + c.ready + c.in_flight + c.dead;
  return c;
}

}  // namespace delayd::bench
