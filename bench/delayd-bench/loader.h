// RunLoad: schedules jobs over `conns` channels (TCP connections), one call
// in flight per connection, the next sent when the last one answered — the
// peers' load loop (dqbench run_load: a blocking thread per connection)
// over gRPC. The connections are driven asynchronously by `client_threads`
// completion-queue threads, which costs the shared 2 cores less than a
// blocking thread per connection. batch 1 sends one Schedule per round
// trip, batch > 1 one ScheduleBatch of `batch` jobs. Round trips go into
// preallocated arrays. Blocks until every connection is done or the cap
// passed.
//
// With stream_window W > 0, each connection instead holds one
// ScheduleStream and keeps up to W Schedule requests in flight on it (W = 1:
// a caller that waits for each answer; more: pipelining), a writer and a
// reader thread per connection; a round trip is from a request's write to
// its answer.
#ifndef DELAYD_BENCH_DELAYD_BENCH_LOADER_H_
#define DELAYD_BENCH_DELAYD_BENCH_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/delayd-bench/endpoint.h"

namespace delayd::bench {

struct LoadSpec {
  Endpoint endpoint;  // the server, TLS and token
  std::string topic;
  std::string id_prefix;  // ids are id_prefix + JobId(...)
  int64_t jobs = 1'000'000;
  int conns = 8;           // 1..9
  int batch = 1;           // 1..1000
  double max_seconds = 0;  // 0: no cap
  // Due times: when window_ms > 0, uniform in [window_start_ms,
  // window_start_ms + window_ms); else now + uniform [min_delay_ms,
  // max_delay_ms].
  int64_t min_delay_ms = 60'000;
  int64_t max_delay_ms = 3'600'000;
  int64_t window_start_ms = 0;
  int64_t window_ms = 0;
  // > 0: each job is recurring, every this many ms from its due time on
  // (anchor and start_at the due time), so its first occurrence falls due
  // then, as a child `<id>@<due ms>` with the same payload.
  int64_t recurring_interval_ms = 0;
  uint64_t seed = 1000;  // thread t uses seed + t
  int channel_tag = 0;   // distinct tags give distinct connections
  int client_threads = 1;
  int stream_window = 0;  // > 0: ScheduleStream, this many in flight
};

struct LoadResult {
  int64_t done = 0;    // jobs the server answered OK
  int64_t errors = 0;  // jobs refused or calls failed
  double secs = 0;     // from go to the last thread's end
  bool capped = false;
  std::vector<double> rtt_us;  // every round trip, sorted
  std::string first_error;
  // offsets[t]: the job index of thread t's first job (see JobIndex).
  std::vector<int64_t> offsets;
};

LoadResult RunLoad(const LoadSpec& spec);

// How RunLoad splits `jobs` among `conns` threads: the job index of each
// thread's first job (the first jobs % conns threads take one more).
std::vector<int64_t> FirstIndexes(int64_t jobs, int conns);

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_LOADER_H_
