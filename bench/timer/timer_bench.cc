// timer_bench: TimingWheel against the hand-written timers of
// baseline_timers.h, side by side, at 1M and 10M (2^20, 10 x 2^20) pending
// entries with due times uniform over one hour. Iteration counts are fixed
// (no calibration rounds) and structures are built once per type and size.
//
//   Fill           insert N entries into an empty structure (per_op: time
//                  per insert); bytes per entry from the structure's own
//                  accounting (B_per_entry) and from the RSS delta
//                  (RSS_B_per_entry).
//   InsertCancel   the steady state of a busy server at N pending: cancel a
//                  random pending entry by its handle and insert a new one
//                  (per_op: per insert+cancel pair). Every timer reclaims a
//                  canceled entry's memory within bounded time (see
//                  baseline_timers.h), and the loop is long enough to charge
//                  that: N pairs per repetition for the wheel, the heaps and
//                  UnorderedSlab — exactly one compaction of a lazy heap
//                  whatever its phase (it compacts when its dead items reach
//                  the N live ones), reported as `compactions` and as
//                  `reclaim_per_op`, the share of per_op spent compacting.
//                  The multimap erases at once, so every pair is alike and
//                  2M pairs suffice. UnorderedSlab (handle bookkeeping and no
//                  order at all) is the floor no cancel-by-handle timer can
//                  beat. B_per_pending: memory per pending entry afterwards.
//   Cancel         at N pending: cancel N/10 random entries (per_op). For the
//                  lazy heaps this is only the mark: no compaction is reached
//                  (N/10 dead < N live), so their reclaim cost is not in it.
//   AdvanceSecond  at N pending, plus 1% of N due in each of the next five
//                  seconds: advance through them in 1-ms steps, like the
//                  timer thread (Time: per second; per_op: per fired entry).
//   CrowdedSecond  1M pending over the hour plus 1M due in one second: how
//                  long the first millisecond of that second takes to fire
//                  (the lateness of its first jobs), after the timer was idle
//                  in the second before. WheelNoAheadTimer: the wheel without
//                  TimingWheel::OpenNextSecond.
//   OpenAhead      TimingWheel only: 1M pending over the hour plus 1M due in
//                  the next second, opened ahead as the timer thread does,
//                  whole (arg 0) or in steps of Scheduler::kOpenStep (arg
//                  512). Time: the whole open; max_call_us: its longest call,
//                  which is how long the timer thread holds its lock and
//                  fires nothing.
//
// The caller's side is the same for all: handles are kept in a plain array
// indexed by the victim's position, as the server keeps them in its index.
//
// Run (Release build): timer_bench --benchmark_counters_tabular=true
//   --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "bench/timer/baseline_timers.h"
#include "benchmark/benchmark.h"

namespace delayd::timer::bench {
namespace {

constexpr int64_t kStartMs = 1795316400000;  // on a second boundary
constexpr int64_t kHourMs = 3600 * 1000;

size_t RssBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) *
         static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Due times uniform over (start, start + 1 h].
std::vector<int64_t> UniformDues(size_t n, int64_t start, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(start + 1, start + kHourMs);
  std::vector<int64_t> dues(n);
  for (int64_t& d : dues) d = dist(rng);
  return dues;
}

std::vector<uint32_t> RandomIndices(size_t count, size_t bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out(count);
  for (uint32_t& i : out) i = static_cast<uint32_t>(rng() % bound);
  return out;
}

// Seconds per `count` operations, from the CPU time of the timed loop (CPU
// time rather than wall time: other processes share this machine's 2 cores).
benchmark::Counter PerOp(size_t count) {
  return benchmark::Counter(
      static_cast<double>(count),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// A timer holding N pending entries, kept between the benchmarks of one
// timer type and size so that a 10M fill happens once, not once per
// benchmark: Fill stores it, InsertCancel and Cancel reuse it (each leaves N
// pending), AdvanceSecond consumes it.
template <typename T>
struct Loaded {
  std::optional<T> timer;
  std::vector<typename T::Handle> handles;  // handles[i]: a pending entry
  uint64_t next_tag = 0;
};

template <typename T>
std::unique_ptr<Loaded<T>>& Cached(size_t n) {
  static std::map<size_t, std::unique_ptr<Loaded<T>>> cache;
  return cache[n];
}

template <typename T>
std::unique_ptr<Loaded<T>> NewLoaded(size_t n) {
  auto loaded = std::make_unique<Loaded<T>>();
  loaded->handles.resize(n);  // touched now, outside any RSS measurement
  return loaded;
}

template <typename T>
void Fill(Loaded<T>& loaded, const std::vector<int64_t>& dues) {
  for (size_t i = 0; i < dues.size(); ++i) {
    loaded.handles[i] = loaded.timer->Insert(dues[i], loaded.next_tag++);
  }
}

template <typename T>
Loaded<T>& GetLoaded(size_t n) {
  std::unique_ptr<Loaded<T>>& cached = Cached<T>(n);
  if (cached == nullptr) {
    cached = NewLoaded<T>(n);
    cached->timer.emplace(kStartMs);
    Fill(*cached, UniformDues(n, kStartMs, 1));
  }
  return *cached;
}

template <typename T>
void BM_Fill(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const std::vector<int64_t> dues = UniformDues(n, kStartMs, 1);
  Cached<T>(n).reset();
  for (auto _ : state) {
    std::unique_ptr<Loaded<T>> loaded = NewLoaded<T>(n);
    malloc_trim(0);
    const size_t rss_before = RssBytes();
    loaded->timer.emplace(kStartMs);
    Fill(*loaded, dues);
    const size_t rss_after = RssBytes();
    state.PauseTiming();
    state.counters["B_per_entry"] =
        static_cast<double>(loaded->timer->MemoryBytes()) /
        static_cast<double>(n);
    state.counters["RSS_B_per_entry"] =
        static_cast<double>(rss_after - rss_before) / static_cast<double>(n);
    Cached<T>(n) = std::move(loaded);
    state.ResumeTiming();
  }
  state.counters["per_op"] = PerOp(n);
}

template <typename T>
void BM_InsertCancel(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto ops = static_cast<size_t>(state.max_iterations);
  Loaded<T>& loaded = GetLoaded<T>(n);
  T& timer = *loaded.timer;
  const std::vector<int64_t> dues = UniformDues(ops, kStartMs, 2);
  const std::vector<uint32_t> victims = RandomIndices(ops, n, 3);
  size_t compactions = 0;
  double compaction_seconds = 0;
  if constexpr (requires { timer.compactions(); }) {
    compactions = timer.compactions();
    compaction_seconds = timer.compaction_seconds();
  }
  size_t k = 0;
  size_t stale = 0;
  for (auto _ : state) {
    const uint32_t i = victims[k];
    stale += !timer.Cancel(loaded.handles[i]);
    loaded.handles[i] = timer.Insert(dues[k], loaded.next_tag++);
    ++k;
  }
  if (stale != 0) state.SkipWithError("a handle of a pending entry was stale");
  state.counters["per_op"] = PerOp(k);
  if constexpr (requires { timer.compactions(); }) {
    state.counters["compactions"] =
        static_cast<double>(timer.compactions() - compactions);
    state.counters["reclaim_per_op"] =
        (timer.compaction_seconds() - compaction_seconds) /
        static_cast<double>(k);
  }
  // Memory per *pending* entry afterwards (lazy heaps: the dead included).
  state.counters["B_per_pending"] =
      static_cast<double>(timer.MemoryBytes()) / static_cast<double>(n);
}

template <typename T>
void BM_Cancel(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto ops = static_cast<size_t>(state.max_iterations);
  Loaded<T>& loaded = GetLoaded<T>(n);
  T& timer = *loaded.timer;
  // Distinct victims: a random permutation's prefix.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(4));
  order.resize(ops);
  size_t k = 0;
  for (auto _ : state) timer.Cancel(loaded.handles[order[k++]]);
  state.counters["per_op"] = PerOp(k);
  // Back to N pending for the next benchmark (untimed).
  const std::vector<int64_t> dues = UniformDues(ops, kStartMs, 7);
  for (size_t j = 0; j < ops; ++j) {
    loaded.handles[order[j]] = timer.Insert(dues[j], loaded.next_tag++);
  }
}

template <typename T>
void BM_AdvanceSecond(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto seconds = static_cast<int64_t>(state.max_iterations);
  Loaded<T>& loaded = GetLoaded<T>(n);
  T& timer = *loaded.timer;
  // Each of the seconds starting at kStartMs + 1000 receives another 1% of N
  // (in shuffled order), on top of its share of the uniform entries.
  const int64_t hot = kStartMs + 1000;
  std::vector<int64_t> dues;
  std::mt19937_64 rng(6);
  for (int64_t s = 0; s < seconds; ++s) {
    for (size_t i = 0; i < n / 100; ++i) {
      dues.push_back(hot + s * 1000 + static_cast<int64_t>(rng() % 1000));
    }
  }
  std::shuffle(dues.begin(), dues.end(), rng);
  for (int64_t due : dues) timer.Insert(due, loaded.next_tag++);
  int64_t now = hot - 1;
  timer.Advance(now);  // the first, partial second: untimed
  size_t fired = 0;
  for (auto _ : state) {
    for (int ms = 0; ms < 1000; ++ms) fired += timer.Advance(++now).size();
  }
  state.counters["fired_per_second"] =
      static_cast<double>(fired) / static_cast<double>(seconds);
  state.counters["per_op"] = PerOp(fired);
  Cached<T>(n).reset();
}

template <typename T>
void BM_CrowdedSecond(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const int64_t crowded = kStartMs + 10 * 1000;
  std::vector<int64_t> dues = UniformDues(n, crowded, 8);
  std::mt19937_64 rng(9);
  for (size_t i = 0; i < n; ++i) {
    dues.push_back(crowded + static_cast<int64_t>(rng() % 1000));
  }
  std::shuffle(dues.begin(), dues.end(), rng);
  T timer(kStartMs);
  uint64_t tag = 0;
  for (int64_t due : dues) timer.Insert(due, tag++);
  timer.Advance(crowded - 1000);
  timer.Idle();
  timer.Advance(crowded - 1);
  timer.Idle();
  size_t fired = 0;
  for (auto _ : state) fired = timer.Advance(crowded).size();
  state.counters["fired"] = static_cast<double>(fired);
}

void BM_OpenAhead(benchmark::State& state) {
  const auto step = static_cast<size_t>(state.range(0));
  const int64_t next = kStartMs + 1000;
  std::vector<int64_t> dues = UniformDues(1 << 20, next, 10);
  std::mt19937_64 rng(11);
  for (size_t i = 0; i < (1 << 20); ++i) {
    dues.push_back(next + static_cast<int64_t>(rng() % 1000));
  }
  std::shuffle(dues.begin(), dues.end(), rng);
  TimingWheel wheel(kStartMs);
  uint64_t tag = 0;
  for (int64_t due : dues) wheel.Insert(due, tag++);
  double max_call_us = 0;
  size_t calls = 0;
  for (auto _ : state) {
    do {
      const auto t0 = std::chrono::steady_clock::now();
      wheel.OpenNextSecond(step == 0 ? SIZE_MAX : step);
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - t0;
      max_call_us = std::max(max_call_us, took.count());
      ++calls;
    } while (!wheel.NextSecondOpen());
  }
  state.counters["max_call_us"] = max_call_us;
  state.counters["calls"] = static_cast<double>(calls);
}

// Fixed iteration counts keep the whole run to a few minutes. InsertCancel:
// `ic1` and `ic10` pairs at 1M and 10M pending (see the file comment).
#define DELAYD_TIMER_BENCH(T, ic1, ic10)  \
  BENCHMARK_TEMPLATE(BM_Fill, T)          \
      ->Arg(1 << 20)                      \
      ->Arg(10 << 20)                     \
      ->Iterations(1)                     \
      ->Unit(benchmark::kMillisecond);    \
  BENCHMARK_TEMPLATE(BM_InsertCancel, T)  \
      ->Arg(1 << 20)                      \
      ->Iterations(ic1)                   \
      ->Unit(benchmark::kNanosecond);     \
  BENCHMARK_TEMPLATE(BM_InsertCancel, T)  \
      ->Arg(10 << 20)                     \
      ->Iterations(ic10)                  \
      ->Unit(benchmark::kNanosecond);     \
  BENCHMARK_TEMPLATE(BM_Cancel, T)        \
      ->Arg(1 << 20)                      \
      ->Arg(10 << 20)                     \
      ->Iterations(1 << 20)               \
      ->Unit(benchmark::kNanosecond);     \
  BENCHMARK_TEMPLATE(BM_AdvanceSecond, T) \
      ->Arg(1 << 20)                      \
      ->Arg(10 << 20)                     \
      ->Iterations(5)                     \
      ->Unit(benchmark::kMillisecond)

BENCHMARK_TEMPLATE(BM_CrowdedSecond, WheelTimer)
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CrowdedSecond, WheelNoAheadTimer)
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CrowdedSecond, HeapTimer)
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CrowdedSecond, MultimapTimer)
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenAhead)
    ->Arg(0)
    ->Arg(512)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_InsertCancel, UnorderedSlab)
    ->Arg(1 << 20)
    ->Iterations(1 << 20)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_TEMPLATE(BM_InsertCancel, UnorderedSlab)
    ->Arg(10 << 20)
    ->Iterations(10 << 20)
    ->Unit(benchmark::kNanosecond);
DELAYD_TIMER_BENCH(WheelTimer, 1 << 20, 10 << 20);
DELAYD_TIMER_BENCH(HeapTimer, 1 << 20, 10 << 20);
DELAYD_TIMER_BENCH(HeapHashSetTimer, 1 << 20, 10 << 20);
DELAYD_TIMER_BENCH(MultimapTimer, 1 << 20, 2 << 20);

}  // namespace
}  // namespace delayd::timer::bench

BENCHMARK_MAIN();
