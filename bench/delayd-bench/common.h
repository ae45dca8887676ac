// Shared pieces of delayd-bench: clocks, the job shape of the peers' harness
// (../shared/peers/src/dqbench.cpp: 100-byte payloads that start with the due
// time in ms, 9-character ids), percentiles and the one-line JSON result
// (channels and call contexts: endpoint.h). Free functions and plain
// values; JsonLine is not thread-safe.
#ifndef DELAYD_BENCH_DELAYD_BENCH_COMMON_H_
#define DELAYD_BENCH_DELAYD_BENCH_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

namespace delayd::bench {

// Wall clock in ms since the epoch (shared by every process on the host, so
// it compares with due times); monotonic seconds for durations.
double NowMs();
double MonoS();
void SleepMs(double ms);
// User + system CPU seconds of this process so far.
double ProcessCpuS();

// Payload bytes per job, as the peers'.
inline constexpr int kPayloadBytes = 100;

// xorshift64*, seeded per thread as dqbench does.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 2685821657736338717ULL;
  }

 private:
  uint64_t s_;
};

// "<due ms, 13 digits> <due ms, 13 digits> <filler>", 100 bytes: the peers'
// layout (their second field is the due time a peer rounded to; delayd keeps
// milliseconds, so both are equal).
void MakePayload(int64_t due_ms, uint64_t rnd, std::string* out);
// The due ms at the start of a payload; -1 if it is not one of ours.
int64_t PayloadDueMs(const std::string& payload);

// Job ids: prefix + (thread + 1) + 8-digit sequence, like dqbench's
// "%d%08ld". Threads are 0..8. JobIndex inverts it given each thread's
// first index (`offsets`); -1 when the id is not of this form.
std::string JobId(const std::string& prefix, int thread, int64_t seq);
int64_t JobIndex(const std::string& id, size_t prefix_len,
                 const std::vector<int64_t>& offsets);

// p in [0, 1] of sorted values, nearest rank (dqbench's definition); NaN
// when empty.
double Percentile(const std::vector<double>& sorted, double p);

// One JSON object on one line of stdout, the interface to the
// orchestrating script.
class JsonLine {
 public:
  void Num(const std::string& key, double v);
  void Str(const std::string& key, const std::string& v);
  void Bool(const std::string& key, bool v);
  void Print() const;

 private:
  void Key(const std::string& key);
  std::string s_ = "{";
};

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_COMMON_H_
