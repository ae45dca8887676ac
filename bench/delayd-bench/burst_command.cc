// `burst` and `herd`: fire lateness, as dqbench's `burst`. Optionally first
// `--background` jobs due 60-3600 s ahead (pending, never due during the
// run). Then `--subscribers` Subscribe streams open and wait; `--jobs` jobs
// are scheduled due at uniformly random ms of [W, W + window), W = the
// next whole second + lead; lateness = receive wall clock - due, recorded
// by each subscriber's reader; acks go in batches from another thread.
// `herd` puts every job at the same instant W (window 1 ms) and defaults to
// a million jobs. `--recurring-interval-ms N` makes each job recurring
// (every N ms from its due time), so what falls due is each one's first
// occurrence: the lateness of occurrences against that of one-shot jobs.
// `--occurrence K` (default 1) measures the K-th occurrence instead, due
// (K-1)*N ms after the first: a steady-state one, made from the previous
// one's handling, not from Schedule's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/delayd-bench/commands.h"
#include "bench/delayd-bench/common.h"
#include "bench/delayd-bench/endpoint.h"
#include "bench/delayd-bench/loader.h"
#include "bench/delayd-bench/server_stats.h"
#include "bench/delayd-bench/subscriber.h"

namespace delayd::bench {

int BurstCommand(Args& args, bool herd) {
  const Endpoint endpoint = ReadEndpoint(args);
  const std::string topic = args.Str("topic", herd ? "herd" : "burst");
  const int64_t jobs = args.Int("jobs", herd ? 1'000'000 : 200'000);
  const int producers = static_cast<int>(args.Int("producers", 8));
  const int batch = static_cast<int>(args.Int("batch", herd ? 1000 : 1));
  const int subscribers = static_cast<int>(args.Int("subscribers", 4));
  const int64_t max_in_flight = args.Int("max-in-flight", 1000);
  const int64_t max_batch = args.Int("max-batch", 0);
  const int64_t lead_ms = args.Int("lead-ms", herd ? 30'000 : 10'000);
  const int64_t window_ms = args.Int("window-ms", herd ? 1 : 2000);
  const double max_wait_s = args.Double("max-wait-seconds", 120);
  const int64_t background = args.Int("background", 0);
  const int64_t recurring_interval_ms = args.Int("recurring-interval-ms", 0);
  const int64_t occurrence = args.Int("occurrence", 1);
  // One line per job received, "receive_ms lateness_ms", for a time
  // series of the lateness.
  const std::string lateness_out = args.Str("lateness-out", "");
  const int background_batch =
      static_cast<int>(args.Int("background-batch", 1000));
  args.CheckAllUsed();
  if (jobs < 1 || producers < 1 || producers > 9 || batch < 1 || batch > 1000 ||
      subscribers < 1 || max_in_flight < 1 || max_batch < 0 ||
      max_batch > 10000 || lead_ms < 0 || window_ms < 1 || background < 0 ||
      background_batch < 1 || background_batch > 1000 ||
      (recurring_interval_ms != 0 && recurring_interval_ms < 1000) ||
      occurrence < 1 || occurrence > 100 ||
      (occurrence > 1 && recurring_interval_ms == 0)) {
    std::fprintf(stderr, "delayd-bench burst: option out of range\n");
    return 2;
  }
  auto control = v1::DelayQueue::NewStub(NewChannel(endpoint, 200));

  LoadResult bg;
  if (background > 0) {
    LoadSpec spec;
    spec.endpoint = endpoint;
    spec.topic = topic;
    spec.id_prefix = "bg";
    spec.jobs = background;
    spec.conns = producers;
    spec.batch = background_batch;
    spec.seed = 5000;
    spec.channel_tag = 300;
    bg = RunLoad(spec);
    std::fprintf(stderr, "background: %lld jobs in %.1f s\n",
                 static_cast<long long>(bg.done), bg.secs);
  }

  LoadSpec spec;
  spec.endpoint = endpoint;
  spec.topic = topic;
  spec.jobs = jobs;
  spec.conns = producers;
  spec.batch = batch;
  spec.window_ms = window_ms;
  spec.recurring_interval_ms = recurring_interval_ms;
  spec.channel_tag = 400;
  Tally tally(jobs, 0, FirstIndexes(jobs, producers));
  const int64_t offset_ms = (occurrence - 1) * recurring_interval_ms;
  tally.occurrence_offset_ms = offset_ms;
  std::vector<std::unique_ptr<Subscriber>> subs;
  for (int i = 0; i < subscribers; ++i) {
    subs.push_back(std::make_unique<Subscriber>(
        endpoint, 500 + i, topic, "bench-" + std::to_string(i),
        static_cast<uint32_t>(max_in_flight), static_cast<uint32_t>(max_batch),
        &tally));
  }
  const double sub_deadline = MonoS() + 30;
  ServerCounts counts;
  while (MonoS() < sub_deadline) {
    counts = GetCounts(*control, endpoint, topic);
    if (counts.ok && counts.subscribers >= subscribers) break;
    SleepMs(5);
  }
  if (!counts.ok || counts.subscribers < subscribers) {
    std::fprintf(stderr, "delayd-bench: subscribers did not register: %s\n",
                 counts.error.c_str());
    for (auto& s : subs) s->Stop(0);
    return 1;
  }

  const double t0 = NowMs();
  const int64_t w = static_cast<int64_t>(std::ceil(t0 / 1000) * 1000) + lead_ms;
  spec.window_start_ms = w;
  const LoadResult load = RunLoad(spec);
  const double t1 = NowMs();
  const double cpu0 = ProcessCpuS();
  const double stop_at =
      static_cast<double>(w + offset_ms + window_ms) + max_wait_s * 1e3;
  while (tally.received.load() < load.done && NowMs() < stop_at) {
    bool any_open = false;
    for (auto& s : subs) any_open = any_open || s->open();
    if (!any_open) break;
    SleepMs(2);
  }
  const double cpu1 = ProcessCpuS();
  for (auto& s : subs) s->Stop(10'000);

  std::vector<double> lat;
  lat.reserve(static_cast<size_t>(tally.received.load()));
  for (double x : tally.lateness_ms) {
    if (!std::isnan(x)) lat.push_back(x);
  }
  if (!lateness_out.empty()) {
    std::FILE* f = std::fopen(lateness_out.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "delayd-bench: cannot write %s\n",
                   lateness_out.c_str());
      return 2;
    }
    for (size_t i = 0; i < tally.lateness_ms.size(); ++i) {
      if (std::isnan(tally.lateness_ms[i])) continue;
      std::fprintf(f, "%.3f %.3f\n", tally.received_ms[i],
                   tally.lateness_ms[i]);
    }
    std::fclose(f);
  }
  std::sort(lat.begin(), lat.end());
  double mean = 0;
  for (double x : lat) mean += x;
  if (!lat.empty()) mean /= static_cast<double>(lat.size());
  double first = 1e300, last = 0;
  int64_t acked = 0, ack_errors = 0, ack_calls = 0, messages = 0;
  std::string stream_error;
  for (auto& s : subs) {
    messages += s->messages();
    if (s->deliveries() > 0) {
      first = std::min(first, s->first_recv_ms());
      last = std::max(last, s->last_recv_ms());
    }
    acked += s->acked();
    ack_errors += s->ack_errors();
    ack_calls += s->ack_calls();
    if (stream_error.empty()) stream_error = s->stream_error();
  }
  const bool any = !lat.empty();
  JsonLine j;
  j.Str("bench", herd ? "herd" : "burst");
  j.Str("peer", "delayd");
  j.Num("jobs", static_cast<double>(jobs));
  if (recurring_interval_ms > 0) {
    j.Num("recurring_interval_ms", static_cast<double>(recurring_interval_ms));
    j.Num("occurrence", static_cast<double>(occurrence));
    j.Num("other_occurrences",
          static_cast<double>(tally.other_occurrences.load()));
  }
  j.Num("background", static_cast<double>(bg.done));
  if (background > 0) {
    j.Num("background_secs", bg.secs);
    j.Num("background_errors", static_cast<double>(bg.errors));
  }
  j.Num("scheduled", static_cast<double>(load.done));
  j.Num("schedule_errors", static_cast<double>(load.errors));
  j.Num("schedule_batch", batch);
  j.Num("schedule_secs", (t1 - t0) / 1000);
  j.Bool("scheduled_before_window", t1 < static_cast<double>(w));
  j.Num("lead_ms", static_cast<double>(lead_ms));
  j.Num("window_ms", static_cast<double>(window_ms));
  j.Num("consumers", subscribers);
  j.Num("max_in_flight", static_cast<double>(max_in_flight));
  j.Num("max_batch", static_cast<double>(max_batch));
  j.Num("received", static_cast<double>(lat.size()));
  j.Num("stream_messages", static_cast<double>(messages));
  j.Num("duplicates", static_cast<double>(tally.duplicates.load()));
  j.Num("early", static_cast<double>(tally.early.load()));
  j.Num("foreign", static_cast<double>(tally.foreign.load()));
  j.Num("acked", static_cast<double>(acked));
  j.Num("ack_errors", static_cast<double>(ack_errors));
  j.Num("ack_calls", static_cast<double>(ack_calls));
  j.Num("lat_ms_min", any ? lat.front() : NAN);
  j.Num("lat_ms_mean", any ? mean : NAN);
  j.Num("lat_ms_p50", Percentile(lat, 0.50));
  j.Num("lat_ms_p90", Percentile(lat, 0.90));
  j.Num("lat_ms_p99", Percentile(lat, 0.99));
  j.Num("lat_ms_p999", Percentile(lat, 0.999));
  j.Num("lat_ms_max", any ? lat.back() : NAN);
  // The window of the occurrence measured. (With --occurrence > 1 the
  // first receive is of an earlier occurrence: ignore it.)
  const int64_t wk = w + offset_ms;
  j.Num("first_recv_minus_window_start_ms",
        any ? first - static_cast<double>(wk) : NAN);
  j.Num("last_recv_minus_window_start_ms",
        any ? last - static_cast<double>(wk) : NAN);
  j.Num("last_recv_minus_window_end_ms",
        any ? last - static_cast<double>(wk + window_ms) : NAN);
  j.Num("recv_rate_jobs_per_s",
        any && last > first
            ? static_cast<double>(lat.size()) / ((last - first) / 1000)
            : NAN);
  j.Num("client_cpu_s_receiving", cpu1 - cpu0);
  if (!load.first_error.empty()) j.Str("first_error", load.first_error);
  if (!stream_error.empty()) j.Str("stream_error", stream_error);
  counts = GetCounts(*control, endpoint, topic, 60'000);
  if (counts.ok) {
    j.Num("server_jobs", static_cast<double>(counts.jobs));
    j.Num("server_in_flight", static_cast<double>(counts.in_flight));
  }
  j.Print();
  return static_cast<int64_t>(lat.size()) == jobs && tally.early == 0 ? 0 : 1;
}

}  // namespace delayd::bench
