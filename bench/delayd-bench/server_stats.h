// GetStats in one call: the jobs a server holds (scheduled + ready +
// in_flight + dead) and its open Subscribe streams, for one topic or (topic
// "") all of them. Blocking, 5 s deadline.
#ifndef DELAYD_BENCH_DELAYD_BENCH_SERVER_STATS_H_
#define DELAYD_BENCH_DELAYD_BENCH_SERVER_STATS_H_

#include <cstdint>
#include <string>

#include "bench/delayd-bench/endpoint.h"
#include "delayd/v1/delayd.grpc.pb.h"

namespace delayd::bench {

struct ServerCounts {
  bool ok = false;  // false: the call failed (error holds why)
  int64_t jobs = 0;
  int64_t scheduled = 0;
  int64_t ready = 0;
  int64_t in_flight = 0;
  int64_t dead = 0;
  int64_t subscribers = 0;
  std::string error;
};

// `endpoint` gives the token; `stub` is on a channel of it.
ServerCounts GetCounts(v1::DelayQueue::Stub& stub, const Endpoint& endpoint,
                       const std::string& topic, int deadline_ms = 5000);

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_SERVER_STATS_H_
