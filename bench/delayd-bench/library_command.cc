// `library`: schedule throughput through the C++ client library — THREADS
// threads share one delayd::client::Client and each calls Client::Schedule
// one job at a time, the way a service schedules one job per request it
// handles. Over the library's ScheduleStream by default (--linger-us L
// batches across threads, ClientOptions::linger); --unary 1 makes it a
// unary rpc per call instead. Prints one JSON line, as `load` does.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/delayd-bench/commands.h"
#include "bench/delayd-bench/common.h"
#include "bench/delayd-bench/endpoint.h"
#include "bench/delayd-bench/server_stats.h"
#include "delayd/client.h"

namespace delayd::bench {

int LibraryCommand(Args& args) {
  const Endpoint endpoint = ReadEndpoint(args);
  const std::string topic = args.Str("topic", "bench");
  const int64_t jobs = args.Int("jobs", 1'000'000);
  const int threads = static_cast<int>(args.Int("threads", 8));
  const double max_seconds = args.Double("max-seconds", 0);
  const int64_t linger_us = args.Int("linger-us", 0);
  const bool unary = args.Int("unary", 0) != 0;
  const int64_t min_delay_ms = args.Int("min-delay-ms", 60'000);
  const int64_t max_delay_ms = args.Int("max-delay-ms", 3'600'000);
  args.CheckAllUsed();
  if (threads < 1 || threads > 1024 || jobs < 1 || linger_us < 0 ||
      linger_us > 1'000'000 || max_delay_ms < min_delay_ms) {
    std::fprintf(stderr,
                 "delayd-bench library: need 1 <= threads <= 1024, jobs >= "
                 "1, 0 <= linger-us <= 1000000, min-delay-ms <= "
                 "max-delay-ms\n");
    return 2;
  }
  client::ClientOptions options;
  options.token = endpoint.token;
  options.schedule_stream = !unary;
  options.linger = absl::Microseconds(linger_us);
  client::Client c(NewChannel(endpoint, 0), options);
  if (absl::Status s = c.CheckHealth(); !s.ok()) {
    std::fprintf(stderr, "delayd-bench library: %s\n", s.ToString().c_str());
    return 1;
  }

  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> rtt_us(threads);
  std::vector<std::string> first_error(threads);
  const double cpu0 = ProcessCpuS();
  const double start = MonoS();
  const double deadline = max_seconds > 0 ? start + max_seconds : 1e300;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::string payload;
      for (int64_t i; (i = next.fetch_add(1)) < jobs && MonoS() <= deadline;) {
        const int64_t delay_ms =
            min_delay_ms + (max_delay_ms > min_delay_ms
                                ? (i * 7919) % (max_delay_ms - min_delay_ms)
                                : 0);
        MakePayload(static_cast<int64_t>(NowMs()) + delay_ms,
                    static_cast<uint64_t>(i) * 2654435761u, &payload);
        const double t0 = MonoS();
        absl::StatusOr<v1::ScheduleResponse> r = c.Schedule(client::JobAfter(
            topic, JobId("", t, i), payload, absl::Milliseconds(delay_ms)));
        rtt_us[t].push_back((MonoS() - t0) * 1e6);
        if (r.ok()) {
          ++done;
        } else {
          ++errors;
          if (first_error[t].empty()) first_error[t] = r.status().ToString();
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double secs = MonoS() - start;
  const double cpu = ProcessCpuS() - cpu0;
  std::vector<double> all;
  std::string error;
  for (int t = 0; t < threads; ++t) {
    all.insert(all.end(), rtt_us[t].begin(), rtt_us[t].end());
    if (error.empty()) error = first_error[t];
  }
  std::sort(all.begin(), all.end());

  JsonLine j;
  j.Str("bench", "library");
  j.Str("peer", "delayd");
  j.Str("path", unary ? "unary" : "stream");
  j.Num("jobs_requested", static_cast<double>(jobs));
  j.Num("jobs_done", static_cast<double>(done));
  j.Num("errors", static_cast<double>(errors));
  j.Num("threads", threads);
  j.Num("linger_us", static_cast<double>(linger_us));
  j.Num("payload_bytes", kPayloadBytes);
  j.Num("secs", secs);
  j.Num("jobs_per_s", secs > 0 ? static_cast<double>(done) / secs : 0);
  j.Bool("capped", done + errors < jobs);
  j.Num("max_seconds", max_seconds);
  j.Num("rtt_us_p50", Percentile(all, 0.50));
  j.Num("rtt_us_p99", Percentile(all, 0.99));
  j.Num("rtt_us_max", all.empty() ? 0 : all.back());
  j.Num("client_cpu_s", cpu);
  j.Num("client_cores", secs > 0 ? cpu / secs : 0);
  if (!error.empty()) j.Str("first_error", error);
  auto stub = v1::DelayQueue::NewStub(NewChannel(endpoint, 100));
  const ServerCounts counts = GetCounts(*stub, endpoint, topic, 120'000);
  if (counts.ok) j.Num("server_jobs", static_cast<double>(counts.jobs));
  j.Print();
  return errors == 0 ? 0 : 1;
}

}  // namespace delayd::bench
