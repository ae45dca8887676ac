// fire_bench: the fire path alone. How long a crowd due at one millisecond
// takes to become ready (the fire thread's work: scan the due index, lock,
// re-read, ready), with no subscriber, over a real RocksDB store and a fake
// clock. A herd's delivery can go no faster than its jobs become ready, and
// on two cores the fire thread's CPU is taken from delivery's.
//
// Each rep: a fresh store in a temp dir under --dir, --jobs jobs of topic
// "herd" (100-byte payloads, ids h0000000...) scheduled in batches of 1,000,
// all due at one millisecond T. The clock is set to T - 400 ms, inside the
// crowd's lead (FirePath::kAheadLeadMs), and the bench waits until the fire
// thread has taken the crowd, prepared it, and sleeps until T. Then it sets
// the clock to T and times, in real time, until the first job is ready and
// until all are. CPU is the process's (user + system) over the same interval:
// the fire thread, plus RocksDB's background threads and anything else that
// ran.
//
//   fire_bench --jobs=1000000 --reps=3 --dir=/var/tmp
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/fire_path.h"
#include "server/core/job_service.h"
#include "server/jobs/limits.h"
#include "server/timer/fake_clock.h"
#include "storage/job_record.h"
#include "storage/rocksdb_job_store.h"

ABSL_FLAG(int, jobs, 1'000'000,
          "Jobs due at the one millisecond; at least "
          "FirePath::kAheadMinJobs (10,000), so that they are a crowd.");
ABSL_FLAG(int, reps, 3, "Repetitions, each on a fresh store.");
ABSL_FLAG(std::string, dir, "/var/tmp",
          "Parent of the temp databases; must be on the real disk.");

namespace delayd::server {
namespace {

constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr int64_t kDueMs = kStartMs + 60'000;
constexpr char kTopic[] = "herd";

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "fire_bench: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

// Polls `done` every 100 us; false after 120 s.
template <typename Pred>
bool Await(Pred done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Microseconds(100));
  }
  return true;
}

struct Result {
  double first_ms;
  double all_ms;
  double cpu_s;
};

Result RunOnce(int jobs) {
  std::string pattern = absl::GetFlag(FLAGS_dir) + "/delayd_fire_bench_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror(pattern.c_str());
    std::exit(1);
  }
  const std::string dir = pattern;
  Result result{};
  {
    absl::StatusOr<std::unique_ptr<storage::RocksDbJobStore>> store =
        storage::RocksDbJobStore::Open(dir + "/data",
                                       storage::RocksDbJobStore::Options());
    if (!store.ok()) Die("open", store.status());
    timer::FakeClock clock(kStartMs);
    JobService service(store->get(), &clock, Limits());
    if (auto r = service.Recover(); !r.ok()) Die("recover", r.status());
    service.Start();

    const std::string payload(100, 'p');
    for (int begin = 0; begin < jobs; begin += 1000) {
      v1::ScheduleBatchRequest batch;
      for (int i = begin; i < std::min(jobs, begin + 1000); ++i) {
        v1::JobSpec& job = *batch.add_requests()->mutable_job();
        job.set_topic(kTopic);
        job.set_id(absl::StrFormat("h%07d", i));
        job.set_payload(payload);
        *job.mutable_fire_at() = storage::UnixMsToTimestamp(kDueMs);
      }
      absl::StatusOr<v1::ScheduleBatchResponse> r =
          service.ScheduleBatch(batch);
      if (!r.ok()) Die("schedule", r.status());
    }

    // Inside the lead: the crowd is taken and prepared, and then waits.
    clock.SetMs(kDueMs - 400);
    // The fire thread, done preparing, sleeps until T.
    if (!clock.AwaitWaiter(kDueMs, absl::Seconds(120)) ||
        service.timers_pending() != 0) {
      Die("lead", absl::DeadlineExceededError("crowd never taken"));
    }

    const double cpu0 = CpuSeconds();
    const absl::Time t0 = absl::Now();
    clock.SetMs(kDueMs);
    const auto ready = [&] { return service.topics().CountsOf(kTopic).ready; };
    if (!Await([&] { return ready() > 0; })) {
      Die("first", absl::DeadlineExceededError("nothing ready"));
    }
    result.first_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (!Await([&] { return ready() == jobs; })) {
      Die("all", absl::DeadlineExceededError("not all ready"));
    }
    result.all_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    result.cpu_s = CpuSeconds() - cpu0;
    service.Stop();
  }
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace
}  // namespace delayd::server

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int jobs = absl::GetFlag(FLAGS_jobs);
  if (jobs < static_cast<int>(delayd::server::FirePath::kAheadMinJobs)) {
    std::fprintf(stderr, "fire_bench: --jobs=%d: at least %zu, a crowd\n", jobs,
                 delayd::server::FirePath::kAheadMinJobs);
    return 2;
  }
  std::printf("%-6s %10s %12s %10s %12s %12s\n", "rep", "jobs", "first_ms",
              "all_ms", "ready/s", "cpu_us/job");
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    const delayd::server::Result r = delayd::server::RunOnce(jobs);
    std::printf("%-6d %10d %12.2f %10.1f %12.0f %12.2f\n", rep, jobs,
                r.first_ms, r.all_ms, jobs / (r.all_ms / 1000.0),
                r.cpu_s * 1e6 / jobs);
    std::fflush(stdout);
  }
  return 0;
}
