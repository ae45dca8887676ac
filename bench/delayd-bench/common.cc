#include "bench/delayd-bench/common.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace delayd::bench {
namespace {

// Filler bytes, as dqbench's FILL (lowercase letters from a fixed seed).
const std::string& Fill() {
  static const std::string* fill = [] {
    auto* s = new std::string(8192, 'a');
    Rng r(42);
    for (char& c : *s) c = static_cast<char>('a' + r.Next() % 26);
    return s;
  }();
  return *fill;
}

}  // namespace

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double MonoS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void SleepMs(double ms) {
  if (ms <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms - ts.tv_sec * 1000.0) * 1e6);
  nanosleep(&ts, nullptr);
}

double ProcessCpuS() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

void MakePayload(int64_t due_ms, uint64_t rnd, std::string* out) {
  char head[32];
  std::snprintf(head, sizeof head, "%013lld %013lld ",
                static_cast<long long>(due_ms), static_cast<long long>(due_ms));
  out->assign(head, 28);
  out->append(Fill(), rnd % 4096, kPayloadBytes - 28);
}

int64_t PayloadDueMs(const std::string& payload) {
  if (payload.size() < 13) return -1;
  int64_t v = 0;
  for (int i = 0; i < 13; ++i) {
    const char c = payload[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string JobId(const std::string& prefix, int thread, int64_t seq) {
  char b[32];
  std::snprintf(b, sizeof b, "%d%08lld", thread + 1,
                static_cast<long long>(seq));
  return prefix + b;
}

int64_t JobIndex(const std::string& id, size_t prefix_len,
                 const std::vector<int64_t>& offsets) {
  if (id.size() != prefix_len + 9) return -1;
  const int thread = id[prefix_len] - '1';
  if (thread < 0 || thread >= static_cast<int>(offsets.size())) return -1;
  int64_t seq = 0;
  for (size_t i = prefix_len + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return -1;
    seq = seq * 10 + (id[i] - '0');
  }
  return offsets[thread] + seq;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return NAN;
  size_t k = static_cast<size_t>(std::ceil(p * sorted.size()));
  k = std::clamp<size_t>(k, 1, sorted.size());
  return sorted[k - 1];
}

void JsonLine::Key(const std::string& key) {
  if (s_.size() > 1) s_ += ", ";
  s_ += "\"" + key + "\": ";
}

void JsonLine::Num(const std::string& key, double v) {
  Key(key);
  char b[64];
  if (std::isnan(v) || std::isinf(v)) {
    std::snprintf(b, sizeof b, "null");
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(b, sizeof b, "%.0f", v);
  } else {
    std::snprintf(b, sizeof b, "%.4f", v);
  }
  s_ += b;
}

void JsonLine::Str(const std::string& key, const std::string& v) {
  Key(key);
  s_ += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') s_ += '\\';
    if (c == '\n') {
      s_ += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;
    s_ += c;
  }
  s_ += '"';
}

void JsonLine::Bool(const std::string& key, bool v) {
  Key(key);
  s_ += v ? "true" : "false";
}

void JsonLine::Print() const {
  std::printf("%s}\n", s_.c_str());
  std::fflush(stdout);
}

}  // namespace delayd::bench
