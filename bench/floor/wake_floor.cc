// wake_floor: the floor of issue 18's library loads, with no network at all.
// THREADS callers each hand in one job at a time and sleep until it is
// answered, as callers of Client::Schedule do; one collector thread takes
// every job queued (after waiting up to --linger-us for THREADS of them, as
// the library's linger does), answers them all at once and wakes each
// caller. Nothing is sent, parsed or stored: what a job costs here is a
// caller's sleep and wake-up and the two locks around them, so no library
// whose callers block on a call does better on this machine.
//
// The wake-up is the library's (client/schedule_pipe.cc): each caller
// sleeps on a mutex of its own, and the collector sets its answer under
// that mutex after letting the queue's go.
//
// Prints one JSON line: jobs/s, CPU per job (the process's rusage) and
// context switches per job.
//
// Usage: wake_floor [--threads=8] [--linger-us=0] [--seconds=5]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace {

struct Caller {
  absl::Mutex mu;
  bool answered ABSL_GUARDED_BY(mu) = false;

  bool Answered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered; }
};

class Floor {
 public:
  Floor(size_t threads, absl::Duration linger)
      : threads_(threads), linger_(linger) {}

  // One job: queued, then asleep until the collector answers it.
  void Call(Caller* c) {
    {
      absl::MutexLock lock(&mu_);
      if (queued_.empty()) first_at_ = absl::Now();
      queued_.push_back(c);
    }
    absl::MutexLock lock(&c->mu);
    c->mu.Await(absl::Condition(c, &Caller::Answered));
    c->answered = false;
  }

  // The collector, until `stop` (once no caller is left waiting).
  void Collect(const std::atomic<bool>& stop) {
    std::vector<Caller*> batch;
    while (!stop.load(std::memory_order_relaxed)) {
      {
        absl::MutexLock lock(&mu_);
        const auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !queued_.empty();
        };
        if (!mu_.AwaitWithTimeout(absl::Condition(&any),
                                  absl::Milliseconds(100))) {
          continue;
        }
        if (linger_ > absl::ZeroDuration()) {
          const auto full = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return queued_.size() >= threads_;
          };
          mu_.AwaitWithDeadline(absl::Condition(&full), first_at_ + linger_);
        }
        batch.swap(queued_);
      }
      for (Caller* c : batch) {
        absl::MutexLock lock(&c->mu);
        c->answered = true;
      }
      batch.clear();
    }
  }

 private:
  const size_t threads_;
  const absl::Duration linger_;
  absl::Mutex mu_;
  std::vector<Caller*> queued_ ABSL_GUARDED_BY(mu_);
  absl::Time first_at_ ABSL_GUARDED_BY(mu_);
};

bool Flag(const std::string& arg, const char* name, int64_t* value) {
  const std::string prefix = std::string("--") + name + "=";
  if (!absl::StartsWith(arg, prefix)) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), value) || *value < 0) {
    std::fprintf(stderr, "wake_floor: bad %s\n", arg.c_str());
    std::exit(2);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t threads = 8, linger_us = 0, seconds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!Flag(arg, "threads", &threads) &&
        !Flag(arg, "linger-us", &linger_us) &&
        !Flag(arg, "seconds", &seconds)) {
      std::fprintf(stderr,
                   "usage: wake_floor [--threads=8] [--linger-us=0] "
                   "[--seconds=5]\n");
      return 2;
    }
  }
  threads = std::max<int64_t>(threads, 1);
  Floor floor(static_cast<size_t>(threads), absl::Microseconds(linger_us));
  std::atomic<bool> stop{false};  // callers: no next job
  std::atomic<bool> done{false};  // the collector: no caller left
  std::atomic<int64_t> jobs{0};
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const absl::Time start = absl::Now();
  std::thread collector([&] { floor.Collect(done); });
  std::vector<std::thread> callers;
  for (int64_t t = 0; t < threads; ++t) {
    callers.emplace_back([&] {
      Caller c;
      int64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        floor.Call(&c);
        ++n;
      }
      jobs += n;
    });
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (std::thread& t : callers) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  done = true;
  collector.join();
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  const auto cpu = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
           (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  const double n = static_cast<double>(std::max<int64_t>(jobs.load(), 1));
  const double switches = static_cast<double>(
      after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw);
  std::printf(
      "{\"bench\": \"wake_floor\", \"threads\": %lld, \"linger_us\": %lld, "
      "\"jobs_done\": %lld, \"secs\": %.4f, \"jobs_per_s\": %.1f, "
      "\"cpu_us_per_job\": %.2f, \"switches_per_job\": %.3f}\n",
      static_cast<long long>(threads), static_cast<long long>(linger_us),
      static_cast<long long>(jobs.load()), secs, n / secs,
      (cpu(after) - cpu(before)) / n * 1e6, switches / n);
  return 0;
}
