// `waitready`: restart timing, as dqbench's `waitready`. Polls a
// (re)starting delayd every millisecond: health Check until SERVING, then
// GetStats until the server holds --expect jobs (scheduled + ready +
// in_flight + dead, of --topic or of all topics). Prints wall-clock epoch
// ms stamps; the orchestrator subtracts the time it took just before exec.
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/delayd-bench/commands.h"
#include "bench/delayd-bench/common.h"
#include "bench/delayd-bench/endpoint.h"
#include "bench/delayd-bench/server_stats.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace delayd::bench {

int WaitReadyCommand(Args& args) {
  const Endpoint endpoint = ReadEndpoint(args);
  const int64_t expect = args.Int("expect", 0);
  const std::string topic = args.Str("topic", "");
  const double timeout_s = args.Double("timeout", 300);
  args.CheckAllUsed();
  const double t_begin = NowMs();
  const double deadline = t_begin + timeout_s * 1000;
  // Until the server first answers, each poll uses a new channel: a
  // channel whose connection attempts failed backs off (seconds, whatever
  // the backoff arguments say), which would add to the measured time. The
  // peers' harness reconnects per poll too.
  int tag = 0;
  auto channel = NewChannel(endpoint, tag);
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto stub = v1::DelayQueue::NewStub(channel);
  double t_connect = 0, t_answer = 0, t_ready = 0;
  int64_t polls = 0, not_serving = 0, count = -1;
  bool ok = false;
  while (NowMs() < deadline) {
    grpc::ClientContext context;
    Authorize(endpoint, &context);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(200));
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &response);
    ++polls;
    if (!status.ok() && t_connect == 0) {
      channel = NewChannel(endpoint, ++tag);
      health = grpc::health::v1::Health::NewStub(channel);
      stub = v1::DelayQueue::NewStub(channel);
    }
    if (status.ok() && t_connect == 0) t_connect = NowMs();
    if (!status.ok() ||
        response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      if (status.ok()) ++not_serving;
      SleepMs(1);
      continue;
    }
    if (t_answer == 0) t_answer = NowMs();
    // GetStats counts every job: seconds at 10M.
    const ServerCounts counts = GetCounts(*stub, endpoint, topic, 120'000);
    if (counts.ok) {
      count = counts.jobs;
      if (count == expect) {
        t_ready = NowMs();
        ok = true;
        break;
      }
    }
    // Serving, but not all jobs there: delayd would have them all by now.
    if (NowMs() - t_answer > 30'000) break;
    SleepMs(1);
  }
  JsonLine j;
  j.Str("bench", "waitready");
  j.Str("peer", "delayd");
  j.Num("expect", static_cast<double>(expect));
  j.Num("count", static_cast<double>(count));
  j.Bool("ok", ok);
  j.Num("t_begin_ms", t_begin);
  j.Num("t_connect_ms", t_connect);
  j.Num("t_answer_ms", t_answer);
  j.Num("t_ready_ms", t_ready);
  j.Num("not_serving_replies", static_cast<double>(not_serving));
  j.Num("polls", static_cast<double>(polls));
  j.Print();
  return ok ? 0 : 1;
}

}  // namespace delayd::bench
