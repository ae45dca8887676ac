// recovery_bench: how fast delayd is back after kill -9 with N pending jobs.
// Prints one table; results in BENCHMARKS.md, "Restart recovery (issue 4)".
//
// Per N (--jobs): a fresh data dir under --dir (must be the real disk, not
// tmpfs); N - G jobs (100-byte payloads, due 60-3600 s ahead, topic
// "bench") written straight into the store with RocksDbJobStore::Apply in
// unsynced batches; then delayd is started and G more jobs are scheduled
// through gRPC (ScheduleBatch, 1000 per call), so that the WAL holds recent
// writes; SIGKILL. Then --reps times: exec delayd on the same dir and time
// (a) the "listening" line (store open, WAL replayed) and (b) health SERVING
// (due index scanned, timers rebuilt); check that the "recovered N jobs"
// line and GetStats both say N; read VmRSS; re-schedule the G gRPC jobs
// (IF_EXISTS_REPLACE, new due times) so the WAL again holds G recent
// writes; SIGKILL. The dir is removed at the end.
//
//   recovery_bench --dir=/var/tmp --jobs=1000000,10000000 --reps=3
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "storage/rocksdb_job_store.h"

ABSL_FLAG(std::string, dir, "/var/tmp",
          "Parent of the temp data dirs; must be on the real disk.");
ABSL_FLAG(std::string, jobs, "1000000,10000000",
          "Comma-separated pending-job counts.");
ABSL_FLAG(int, reps, 3, "Timed restarts per job count.");
ABSL_FLAG(int, grpc_jobs, 30000,
          "Jobs written through gRPC before each kill (in the WAL).");
ABSL_FLAG(std::string, delayd, DELAYD_BINARY_PATH, "The delayd binary.");
ABSL_FLAG(bool, settle, false,
          "After the preload, let RocksDB finish its compactions before the "
          "first start (default: restart with the preload's compaction "
          "debt, as after a burst of writes).");
ABSL_FLAG(bool, keep_dir, false,
          "Keep the last data dir (for profiling a restart by hand).");

extern char** environ;

namespace delayd::bench {
namespace {

constexpr char kTopic[] = "bench";

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "recovery_bench: %s\n", what.c_str());
  std::exit(1);
}

// A delayd child whose stderr is read line by line, each line stamped with
// the time it arrived.
class Delayd {
 public:
  explicit Delayd(const std::string& data_dir) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) Die("pipe2");
    std::vector<std::string> args = {
        absl::GetFlag(FLAGS_delayd), "--listen=127.0.0.1:0",
        "--metrics-listen=127.0.0.1:0", "--data-dir=" + data_dir};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    start_ = absl::Now();
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) !=
        0) {
      Die("cannot spawn " + args[0]);
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] { Read(fd); });
  }
  ~Delayd() {
    Kill();
    reader_.join();
  }

  // Time from spawn to the first line containing `text`; dies after
  // `timeout`.
  absl::Duration WaitLine(const std::string& text, std::string* line) {
    absl::MutexLock lock(&mu_);
    auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [at, l] : lines_) {
        if (l.find(text) != std::string::npos) return true;
      }
      return eof_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&found), absl::Minutes(10));
    for (const auto& [at, l] : lines_) {
      if (l.find(text) != std::string::npos) {
        if (line != nullptr) *line = l;
        return at - start_;
      }
    }
    Die("delayd exited or hung before printing \"" + text + "\"");
  }

  // Polls health every millisecond; time from spawn to SERVING.
  absl::Duration WaitServing(const std::string& address) {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    const absl::Time deadline = absl::Now() + absl::Minutes(10);
    while (absl::Now() < deadline) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
      grpc::health::v1::HealthCheckResponse resp;
      if (stub->Check(&context, {}, &resp).ok() &&
          resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
        return absl::Now() - start_;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    Die("delayd did not report SERVING");
  }

  int64_t RssKb() const {
    std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
    for (std::string l; std::getline(in, l);) {
      int64_t kb = 0;
      if (l.starts_with("VmRSS:") &&
          absl::SimpleAtoi(
              absl::StripSuffix(absl::StripAsciiWhitespace(l.substr(6)), " kB"),
              &kb)) {
        return kb;
      }
    }
    return -1;
  }

  // CPU seconds (user + system) used so far by the main thread (which
  // opens the store and recovers) and by the whole process.
  double MainThreadCpuSeconds() const {
    return CpuSeconds(absl::StrCat("/proc/", pid_, "/task/", pid_, "/stat"));
  }
  double ProcessCpuSeconds() const {
    return CpuSeconds(absl::StrCat("/proc/", pid_, "/stat"));
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  void Read(int fd) {
    std::string partial;
    char buf[4096];
    while (true) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      const absl::Time now = absl::Now();
      partial.append(buf, n);
      absl::MutexLock lock(&mu_);
      for (size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
        lines_.emplace_back(now, partial.substr(0, nl));
        partial.erase(0, nl + 1);
      }
    }
    close(fd);
    absl::MutexLock lock(&mu_);
    eof_ = true;
  }

  static double CpuSeconds(const std::string& stat_path) {
    std::ifstream in(stat_path);
    std::string stat((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    // Fields after "pid (comm) ": state is field 3, utime 14, stime 15.
    std::vector<std::string> f =
        absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
    int64_t utime = 0, stime = 0;
    if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) ||
        !absl::SimpleAtoi(f[12], &stime)) {
      return -1;
    }
    return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  }

  pid_t pid_ = -1;
  absl::Time start_;
  std::thread reader_;
  absl::Mutex mu_;
  std::vector<std::pair<absl::Time, std::string>> lines_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

std::string AddressOf(const std::string& listening_line) {
  const size_t at = listening_line.find("grpc=");
  if (at == std::string::npos) Die("no address in: " + listening_line);
  return listening_line.substr(at + 5, listening_line.find(' ', at) - at - 5);
}

std::string RandomPayload(std::mt19937_64& rng) {
  std::string p(100, '\0');
  for (char& c : p) c = static_cast<char>('!' + rng() % 90);
  return p;
}

// N jobs straight into the store, unsynced batches of 10000; closed (and so
// flushed) at the end, like a server that ran for a while.
void Preload(const std::string& path, int64_t n, std::mt19937_64& rng) {
  absl::StatusOr<std::unique_ptr<storage::RocksDbJobStore>> store =
      storage::RocksDbJobStore::Open(path, {});
  if (!store.ok()) Die(store.status().ToString());
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<storage::Mutation> batch;
  for (int64_t i = 0; i < n; ++i) {
    storage::JobRecord record;
    v1::Job* job = record.mutable_job();
    job->set_topic(kTopic);
    job->set_id(absl::StrCat("job-", i));
    job->set_payload(RandomPayload(rng));
    job->set_state(v1::JOB_STATE_SCHEDULED);
    *job->mutable_fire_at() =
        storage::UnixMsToTimestamp(now_ms + 60000 + rng() % 3540000);
    v1::RetryPolicy* retry = job->mutable_retry();
    retry->set_max_attempts(10);
    retry->mutable_lease()->set_seconds(30);
    retry->mutable_initial_backoff()->set_seconds(1);
    retry->mutable_max_backoff()->set_seconds(600);
    retry->set_backoff_multiplier(2);
    *job->mutable_created_at() = storage::UnixMsToTimestamp(now_ms);
    *job->mutable_updated_at() = storage::UnixMsToTimestamp(now_ms);
    record.set_spec_digest(rng() | 1);
    batch.push_back(storage::Mutation::Put(std::move(record), std::nullopt));
    if (batch.size() == 10000 || i + 1 == n) {
      if (absl::Status s = (*store)->Apply(batch, storage::Durability::kNoSync);
          !s.ok()) {
        Die(s.ToString());
      }
      batch.clear();
    }
  }
  if (absl::Status s = (*store)->Close(); !s.ok()) Die(s.ToString());
}

// Schedules (or replaces) ids g-0 .. g-(count-1) through gRPC.
void ScheduleThroughGrpc(const std::string& address, int count,
                         std::mt19937_64& rng) {
  auto stub = v1::DelayQueue::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int begin = 0; begin < count; begin += 1000) {
    v1::ScheduleBatchRequest req;
    for (int i = begin; i < std::min(count, begin + 1000); ++i) {
      v1::ScheduleRequest* r = req.add_requests();
      r->set_if_exists(v1::IF_EXISTS_REPLACE);
      v1::JobSpec* job = r->mutable_job();
      job->set_topic(kTopic);
      job->set_id(absl::StrCat("g-", i));
      job->set_payload(RandomPayload(rng));
      job->mutable_delay()->set_seconds(60 + rng() % 3540);
    }
    v1::ScheduleBatchResponse resp;
    grpc::ClientContext context;
    const grpc::Status s = stub->ScheduleBatch(&context, req, &resp);
    if (!s.ok()) Die("ScheduleBatch: " + s.error_message());
    for (const v1::ScheduleResult& r : resp.results()) {
      if (r.code() != 0) Die("ScheduleBatch result: " + r.message());
    }
  }
}

uint64_t LiveJobs(const std::string& address) {
  auto stub = v1::DelayQueue::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::GetStatsRequest req;
  req.set_topic(kTopic);
  v1::GetStatsResponse resp;
  grpc::ClientContext context;
  const grpc::Status s = stub->GetStats(&context, req, &resp);
  if (!s.ok() || resp.topics_size() != 1) Die("GetStats: " + s.error_message());
  return resp.topics(0).scheduled() + resp.topics(0).ready() +
         resp.topics(0).in_flight();
}

struct Rep {
  double listening_s = 0, serving_s = 0;
  double main_cpu_s = 0, process_cpu_s = 0;  // until SERVING
  int64_t rss_kb = 0;
  std::string recovered_line;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int64_t EmptyServerRssKb(const std::string& parent) {
  const std::string dir = parent + "/empty";
  Delayd d(dir);
  std::string line;
  d.WaitLine("delayd: listening ", &line);
  d.WaitServing(AddressOf(line));
  d.WaitLine("delayd: recovered ", nullptr);
  const int64_t kb = d.RssKb();
  d.Kill();
  std::filesystem::remove_all(dir);
  return kb;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string l;
  std::getline(in, l);
  return l + "\n";
}

void PrintRow(int64_t n, const std::string& rep, const Rep& r,
              int64_t empty_rss_kb) {
  std::printf(
      "| %9lld | %6s | %6.3f s | %6.3f s | %5.2f s | %5.2f s | %4.0f MiB | "
      "%3.0f B | %s |\n",
      static_cast<long long>(n), rep.c_str(), r.listening_s, r.serving_s,
      r.main_cpu_s, r.process_cpu_s, r.rss_kb / 1024.0,
      (r.rss_kb - empty_rss_kb) * 1024.0 / n,
      r.recovered_line.empty()
          ? ""
          : r.recovered_line.substr(r.recovered_line.find("recovered"))
                .c_str());
  std::fflush(stdout);
}

// Opens the store and waits until RocksDB has no flush or compaction left
// to do, as in a server that has been idle for a while.
void Settle(const std::string& path) {
  absl::StatusOr<std::unique_ptr<storage::RocksDbJobStore>> store =
      storage::RocksDbJobStore::Open(path, {});
  if (!store.ok()) Die(store.status().ToString());
  auto busy = [&] {
    for (const char* cf : {"jobs", "due"}) {
      if ((*store)->GetProperty(cf, "rocksdb.compaction-pending") != "0") {
        return true;
      }
    }
    return (*store)->GetProperty("default",
                                 "rocksdb.num-running-compactions") != "0" ||
           (*store)->GetProperty("default", "rocksdb.num-running-flushes") !=
               "0";
  };
  while (busy()) absl::SleepFor(absl::Milliseconds(200));
  if (absl::Status s = (*store)->Close(); !s.ok()) Die(s.ToString());
}

void Run(int64_t n, const std::string& parent, int64_t empty_rss_kb) {
  std::string root = parent + "/delayd_recovery_bench_XXXXXX";
  if (mkdtemp(root.data()) == nullptr) Die("mkdtemp under " + parent);
  const std::string data = root + "/data";
  const int g =
      static_cast<int>(std::min<int64_t>(absl::GetFlag(FLAGS_grpc_jobs), n));
  std::mt19937_64 rng(n);
  absl::Time t = absl::Now();
  Preload(data, n - g, rng);
  std::printf("# %lld jobs: store preload of %lld in %.1f s",
              static_cast<long long>(n), static_cast<long long>(n - g),
              absl::ToDoubleSeconds(absl::Now() - t));
  if (absl::GetFlag(FLAGS_settle)) {
    t = absl::Now();
    Settle(data);
    std::printf(", compactions settled in %.1f s",
                absl::ToDoubleSeconds(absl::Now() - t));
  }
  t = absl::Now();
  {
    Delayd d(data);
    std::string line;
    d.WaitLine("delayd: listening ", &line);
    d.WaitServing(AddressOf(line));
    ScheduleThroughGrpc(AddressOf(line), g, rng);
  }  // SIGKILL
  std::printf(", first start + %d via gRPC in %.1f s; data dir %.0f MiB\n", g,
              absl::ToDoubleSeconds(absl::Now() - t), [&] {
                uintmax_t bytes = 0;
                for (const auto& e :
                     std::filesystem::recursive_directory_iterator(data)) {
                  if (e.is_regular_file()) bytes += e.file_size();
                }
                return bytes / 1048576.0;
              }());
  std::vector<Rep> reps;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    Delayd d(data);
    std::string line;
    Rep rep;
    rep.listening_s =
        absl::ToDoubleSeconds(d.WaitLine("delayd: listening ", &line));
    const std::string address = AddressOf(line);
    rep.serving_s = absl::ToDoubleSeconds(d.WaitServing(address));
    rep.main_cpu_s = d.MainThreadCpuSeconds();
    rep.process_cpu_s = d.ProcessCpuSeconds();
    rep.rss_kb = d.RssKb();
    d.WaitLine("delayd: recovered ", &rep.recovered_line);
    const std::string want = absl::StrCat("delayd: recovered ", n, " jobs");
    if (rep.recovered_line.find(want) == std::string::npos) {
      Die("expected \"" + want + "\", got: " + rep.recovered_line);
    }
    if (const uint64_t live = LiveJobs(address);
        live != static_cast<uint64_t>(n)) {
      Die(absl::StrCat("GetStats says ", live, " live jobs, want ", n));
    }
    ScheduleThroughGrpc(address, g, rng);
    d.Kill();
    PrintRow(n, absl::StrCat(r + 1), rep, empty_rss_kb);
    reps.push_back(rep);
  }
  auto median = [&](double Rep::*field) {
    std::vector<double> v;
    for (const Rep& r : reps) v.push_back(r.*field);
    return Median(v);
  };
  Rep m;
  m.listening_s = median(&Rep::listening_s);
  m.serving_s = median(&Rep::serving_s);
  m.main_cpu_s = median(&Rep::main_cpu_s);
  m.process_cpu_s = median(&Rep::process_cpu_s);
  std::vector<double> rss;
  for (const Rep& r : reps) rss.push_back(r.rss_kb);
  m.rss_kb = static_cast<int64_t>(Median(rss));
  PrintRow(n, "median", m, empty_rss_kb);
  std::printf("# load average after: %s", LoadAverage().c_str());
  if (absl::GetFlag(FLAGS_keep_dir)) {
    std::printf("# kept %s\n", data.c_str());
  } else {
    std::filesystem::remove_all(root);
  }
}

}  // namespace
}  // namespace delayd::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string parent = absl::GetFlag(FLAGS_dir);
  std::string empty = parent + "/delayd_recovery_bench_XXXXXX";
  if (mkdtemp(empty.data()) == nullptr) delayd::bench::Die("mkdtemp");
  const int64_t empty_rss_kb = delayd::bench::EmptyServerRssKb(empty);
  std::filesystem::remove_all(empty);
  std::printf("# delayd %s; empty server RSS %.1f MiB\n",
              absl::GetFlag(FLAGS_delayd).c_str(), empty_rss_kb / 1024.0);
  std::printf("# load average before: %s",
              delayd::bench::LoadAverage().c_str());
  std::printf(
      "| jobs | rep | exec->listening | exec->SERVING | main thread CPU | "
      "process CPU | RSS | RSS/job (minus empty) | log |\n"
      "|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_jobs), ',', absl::SkipEmpty())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(s, &n) || n <= 0) delayd::bench::Die("bad --jobs");
    delayd::bench::Run(n, parent, empty_rss_kb);
  }
  return 0;
}
