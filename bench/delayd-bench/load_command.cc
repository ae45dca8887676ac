// `load`: schedule throughput, as dqbench's `load` (see loader.h).
#include <cstdio>

#include "bench/delayd-bench/commands.h"
#include "bench/delayd-bench/common.h"
#include "bench/delayd-bench/endpoint.h"
#include "bench/delayd-bench/loader.h"
#include "bench/delayd-bench/server_stats.h"

namespace delayd::bench {

int LoadCommand(Args& args) {
  LoadSpec spec;
  spec.endpoint = ReadEndpoint(args);
  spec.topic = args.Str("topic", "bench");
  spec.id_prefix = args.Str("id-prefix", "");
  spec.jobs = args.Int("jobs", 1'000'000);
  spec.conns = static_cast<int>(args.Int("conns", 8));
  spec.batch = static_cast<int>(args.Int("batch", 1));
  spec.max_seconds = args.Double("max-seconds", 0);
  spec.min_delay_ms = args.Int("min-delay-ms", 60'000);
  spec.max_delay_ms = args.Int("max-delay-ms", 3'600'000);
  spec.client_threads = static_cast<int>(args.Int("client-threads", 1));
  spec.recurring_interval_ms = args.Int("recurring-interval-ms", 0);
  spec.stream_window = static_cast<int>(args.Int("stream", 0));
  args.CheckAllUsed();
  if (spec.conns < 1 || spec.conns > 9 || spec.batch < 1 || spec.batch > 1000 ||
      spec.jobs < 1 || spec.max_delay_ms < spec.min_delay_ms ||
      spec.stream_window < 0 || spec.stream_window > 1024 ||
      (spec.stream_window > 0 && spec.batch != 1) ||
      (spec.recurring_interval_ms != 0 && spec.recurring_interval_ms < 1000)) {
    std::fprintf(stderr,
                 "delayd-bench load: need 1 <= conns <= 9, 1 <= batch <= "
                 "1000, jobs >= 1, min-delay-ms <= max-delay-ms, "
                 "0 <= stream <= 1024 (with batch 1)\n");
    return 2;
  }
  const double cpu0 = ProcessCpuS();
  LoadResult r = RunLoad(spec);
  JsonLine j;
  j.Str("bench", "load");
  j.Str("peer", "delayd");
  j.Num("jobs_requested", static_cast<double>(spec.jobs));
  j.Num("jobs_done", static_cast<double>(r.done));
  j.Num("errors", static_cast<double>(r.errors));
  j.Num("conns", spec.conns);
  j.Num("batch", spec.batch);
  j.Num("payload_bytes", kPayloadBytes);
  j.Num("secs", r.secs);
  j.Num("jobs_per_s", r.secs > 0 ? r.done / r.secs : 0);
  j.Bool("capped", r.capped);
  j.Num("max_seconds", spec.max_seconds);
  j.Num("rtt_us_p50", Percentile(r.rtt_us, 0.50));
  j.Num("rtt_us_p99", Percentile(r.rtt_us, 0.99));
  j.Num("rtt_us_p999", Percentile(r.rtt_us, 0.999));
  j.Num("rtt_us_max", r.rtt_us.empty() ? 0 : r.rtt_us.back());
  j.Num("client_threads", spec.client_threads);
  if (spec.stream_window > 0) j.Num("stream_window", spec.stream_window);
  if (spec.recurring_interval_ms > 0) {
    j.Num("recurring_interval_ms",
          static_cast<double>(spec.recurring_interval_ms));
  }
  const double cpu = ProcessCpuS() - cpu0;
  j.Num("client_cpu_s", cpu);
  // Cores the client kept busy: near client_threads means the client, not
  // the server, set the pace.
  j.Num("client_cores", r.secs > 0 ? cpu / r.secs : 0);
  if (!r.first_error.empty()) j.Str("first_error", r.first_error);
  auto stub = v1::DelayQueue::NewStub(NewChannel(spec.endpoint, 100));
  const ServerCounts counts =
      GetCounts(*stub, spec.endpoint, spec.topic, 120'000);
  if (counts.ok) j.Num("server_jobs", static_cast<double>(counts.jobs));
  j.Print();
  return r.errors == 0 ? 0 : 1;
}

}  // namespace delayd::bench
