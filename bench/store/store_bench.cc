// store_bench: throughput of RocksDbJobStore alone (no gRPC) and the speed
// of the key-only due-index scan that recovery uses. Prints one table.
//
// Write scenarios: W writer threads, each calling Apply with batches of B
// new jobs (100-byte payload, due 60-3600 s ahead, topic "bench") for
// --seconds, with --sync=always or none. Every scenario runs on a fresh
// database in a temp dir under --dir (removed afterwards). Group commit is
// shown by RocksDB's own counters: WAL syncs and writes per sync.
//
// Scan scenario: a child process fills N live jobs (unsynced batches of
// 1000) and exits without closing the store (as kill -9 would); then the
// store is opened (timed: WAL replay) and its whole due index scanned
// (timed), then closed cleanly, reopened and scanned twice more.
//
//   store_bench --dir=/var/tmp --seconds=10 --scan_keys=1000000,10000000
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/store/bench_job.h"
#include "storage/rocksdb_job_store.h"

ABSL_FLAG(std::string, dir, "/var/tmp",
          "Parent of the temp databases; must be on the real disk.");
ABSL_FLAG(int, seconds, 10, "Duration of each write scenario.");
ABSL_FLAG(int, threads, 8, "Writer threads.");
ABSL_FLAG(
    std::string, scan_keys, "1000000",
    "Comma-separated due-index sizes for the scan scenario; empty: none.");
ABSL_FLAG(bool, writes, true, "Run the write scenarios.");
ABSL_FLAG(std::string, only, "",
          "Run only the write scenarios whose name contains this.");
ABSL_FLAG(std::string, internal_fill_and_crash, "",
          "Internal: fill a store in this dir and exit without closing it.");
ABSL_FLAG(int64_t, internal_keys, 0, "Internal: jobs to fill.");
ABSL_FLAG(bool, print_dbstats, false,
          "Print RocksDB's rocksdb.dbstats after each write scenario.");

namespace delayd::storage {
namespace {

// A temp database directory, removed on destruction.
class BenchDir {
 public:
  BenchDir() {
    std::string pattern =
        absl::GetFlag(FLAGS_dir) + "/delayd_store_bench_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror(pattern.c_str());
      std::exit(1);
    }
    path_ = pattern;
  }
  ~BenchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<RocksDbJobStore> OpenOrDie(const std::string& path,
                                           const RocksDbJobStore::Options& o) {
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store =
      RocksDbJobStore::Open(path, o);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(store);
}

// "Cumulative WAL: 12 writes, 3 syncs, ..." -> {12, 3}.
std::pair<uint64_t, uint64_t> WalWritesAndSyncs(const RocksDbJobStore& store) {
  const std::string stats =
      store.GetProperty("default", "rocksdb.dbstats").value_or("");
  if (absl::GetFlag(FLAGS_print_dbstats)) {
    std::fprintf(stderr, "%s\n", stats.c_str());
  }
  const size_t at = stats.find("Cumulative WAL: ");
  if (at == std::string::npos) return {0, 0};
  std::vector<std::string> words =
      absl::StrSplit(stats.substr(at + 16, 80), ' ', absl::SkipEmpty());
  uint64_t writes = 0, syncs = 0;
  if (words.size() >= 3) {
    // RocksDB prints counts with K/M suffixes above 10000; keep the digits.
    auto parse = [](std::string w, uint64_t* out) {
      uint64_t mult = 1;
      if (!w.empty() && w.back() == 'K') mult = 1000, w.pop_back();
      if (!w.empty() && w.back() == 'M') mult = 1000000, w.pop_back();
      if (absl::SimpleAtoi(w, out)) *out *= mult;
    };
    parse(words[0], &writes);
    parse(words[2], &syncs);
  }
  return {writes, syncs};
}

// User + system CPU seconds of this process so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct WriteResult {
  uint64_t jobs = 0;
  uint64_t applies = 0;
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0;
  uint64_t wal_writes = 0, wal_syncs = 0;
  double cpu_seconds = 0;  // Of the whole process, flushes included.
};

WriteResult RunWrites(SyncMode mode, int threads, int batch, bool pipelined) {
  BenchDir dir;
  RocksDbJobStore::Options options;
  options.sync_mode = mode;
  options.pipelined_write = pipelined;
  std::unique_ptr<RocksDbJobStore> store = OpenOrDie(dir.path(), options);
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<uint64_t> jobs{0};
  std::atomic<bool> failed{false};
  const double cpu_start = CpuSeconds();
  const absl::Time start = absl::Now();
  const absl::Time deadline =
      start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::uniform_int_distribution<int64_t> delay(60'000, 3'600'000);
      uint64_t n = 0;
      std::vector<Mutation> mutations;
      while (absl::Now() < deadline) {
        const int64_t now_ms = absl::ToUnixMillis(absl::Now());
        mutations.clear();
        for (int i = 0; i < batch; ++i) {
          mutations.push_back(
              Mutation::Put(MakeBenchJob(absl::StrCat("w", t, "-", n++), now_ms,
                                         now_ms + delay(rng), 100),
                            std::nullopt));
        }
        const absl::Time before = absl::Now();
        const absl::Status s = store->Apply(mutations, Durability::kSync);
        latencies[t].push_back(
            absl::ToDoubleMilliseconds(absl::Now() - before));
        if (!s.ok()) {
          std::fprintf(stderr, "Apply: %s\n", s.ToString().c_str());
          failed = true;
          return;
        }
        jobs += batch;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  if (failed) std::exit(1);
  WriteResult r;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  r.cpu_seconds = CpuSeconds() - cpu_start;
  r.jobs = jobs;
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  r.applies = all.size();
  if (!all.empty()) {
    r.p50_ms = all[all.size() / 2];
    r.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  std::tie(r.wal_writes, r.wal_syncs) = WalWritesAndSyncs(*store);
  if (absl::Status s = store->Close(); !s.ok()) {
    std::fprintf(stderr, "Close: %s\n", s.ToString().c_str());
  }
  return r;
}

void PrintWriteRow(const char* name, int threads, int batch,
                   const WriteResult& r) {
  const double per_sync =
      r.wal_syncs > 0 ? static_cast<double>(r.applies) / r.wal_syncs : 0;
  std::printf(
      "| %-38s | %2d | %4d | %8.0f | %8.0f | %6.2f | %6.2f | %7lu | %6.1f | "
      "%5.2f |\n",
      name, threads, batch, r.jobs / r.seconds, r.applies / r.seconds, r.p50_ms,
      r.p99_ms, static_cast<unsigned long>(r.wal_syncs), per_sync,
      r.jobs > 0 ? r.cpu_seconds * 1e6 / r.jobs : 0.0);
  std::fflush(stdout);
}

// Child process of RunScan: fills `keys` live jobs (unsynced batches of 1000)
// into a new store at `path`, then exits without closing it, as kill -9
// would: what the WAL holds reached the OS, the memtables were not flushed.
[[noreturn]] void FillAndCrash(const std::string& path, int64_t keys) {
  RocksDbJobStore::Options options;
  options.sync_mode = SyncMode::kNone;
  std::unique_ptr<RocksDbJobStore> store = OpenOrDie(path, options);
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> delay(0, 30LL * 86'400'000);
  std::vector<Mutation> batch;
  for (int64_t i = 0; i < keys; ++i) {
    batch.push_back(Mutation::Put(
        MakeBenchJob(absl::StrCat("job-", i), now_ms, now_ms + delay(rng), 0),
        std::nullopt));
    if (batch.size() == 1000 || i + 1 == keys) {
      if (absl::Status s = store->Apply(batch, Durability::kNoSync); !s.ok()) {
        std::fprintf(stderr, "fill: %s\n", s.ToString().c_str());
        _exit(1);
      }
      batch.clear();
    }
  }
  _exit(0);
}

// Opens the store at `path` (timed) and scans its whole due index (timed),
// checking that it holds `keys` entries in order; prints one row.
std::unique_ptr<RocksDbJobStore> OpenAndScan(const std::string& path,
                                             int64_t keys, const char* state,
                                             double fill_s) {
  RocksDbJobStore::Options options;
  options.sync_mode = SyncMode::kNone;
  const absl::Time open_start = absl::Now();
  std::unique_ptr<RocksDbJobStore> store = OpenOrDie(path, options);
  const double open_s = absl::ToDoubleSeconds(absl::Now() - open_start);
  int64_t seen = 0, last = -1;
  bool ordered = true;
  const absl::Time scan_start = absl::Now();
  const absl::Status s =
      store->ScanDue(0, std::numeric_limits<int64_t>::max(),
                     [&](int64_t due, std::string_view, std::string_view) {
                       ordered = ordered && due >= last;
                       last = due;
                       ++seen;
                       return true;
                     });
  const double scan_s = absl::ToDoubleSeconds(absl::Now() - scan_start);
  if (!s.ok() || seen != keys || !ordered) {
    std::fprintf(stderr, "scan: %s, %ld of %ld keys, ordered %d\n",
                 s.ToString().c_str(), static_cast<long>(seen),
                 static_cast<long>(keys), ordered);
    std::exit(1);
  }
  std::printf("| %10ld | %-26s | %6.1f | %6.3f | %6.3f | %6.3f | %6.2f |\n",
              static_cast<long>(keys), state, fill_s, open_s, scan_s,
              open_s + scan_s, keys / scan_s / 1e6);
  std::fflush(stdout);
  return store;
}

void RunScan(int64_t keys) {
  BenchDir dir;
  // Fill in a child process that dies without closing the store.
  std::string dir_flag = "--internal_fill_and_crash=" + dir.path();
  std::string keys_flag = absl::StrCat("--internal_keys=", keys);
  char* child_argv[] = {const_cast<char*>("store_bench"), dir_flag.data(),
                        keys_flag.data(), nullptr};
  const absl::Time fill_start = absl::Now();
  pid_t child = 0;
  int status = 0;
  if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, child_argv,
                  environ) != 0 ||
      waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fill child failed\n");
    std::exit(1);
  }
  const double fill_s = absl::ToDoubleSeconds(absl::Now() - fill_start);
  // 1: like a restart after kill -9 (replays the WAL); its Close flushes.
  OpenAndScan(dir.path(), keys, "after kill -9 (WAL replay)", fill_s).reset();
  // 2: a restart after a clean shutdown; 3: the same scan again.
  std::unique_ptr<RocksDbJobStore> store =
      OpenAndScan(dir.path(), keys, "after clean close", fill_s);
  store.reset();
  OpenAndScan(dir.path(), keys, "after clean close, again", fill_s).reset();
}

}  // namespace
}  // namespace delayd::storage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (const std::string dir = absl::GetFlag(FLAGS_internal_fill_and_crash);
      !dir.empty()) {
    delayd::storage::FillAndCrash(dir, absl::GetFlag(FLAGS_internal_keys));
  }
  using delayd::storage::SyncMode;
  const int threads = absl::GetFlag(FLAGS_threads);
  std::printf("store_bench: dir %s, %d s per write scenario, %u cores\n\n",
              absl::GetFlag(FLAGS_dir).c_str(), absl::GetFlag(FLAGS_seconds),
              std::thread::hardware_concurrency());
  if (absl::GetFlag(FLAGS_writes)) {
    std::printf(
        "| %-38s | th | batch | jobs/s | Applies/s | p50 ms | p99 ms | WAL "
        "syncs | Applies/sync | CPU us/job |\n",
        "scenario");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    struct Scenario {
      const char* name;
      SyncMode mode;
      int threads;
      int batch;
      bool pipelined;
    };
    const Scenario scenarios[] = {
        {"sync=always, batch 100", SyncMode::kAlways, threads, 100, true},
        {"sync=always, batch 100, no pipelining", SyncMode::kAlways, threads,
         100, false},
        {"sync=always, 1 per write", SyncMode::kAlways, threads, 1, true},
        {"sync=always, 1 per write, no pipelining", SyncMode::kAlways, threads,
         1, false},
        {"sync=always, 1 per write, 1 thread", SyncMode::kAlways, 1, 1, true},
        {"sync=none, batch 100", SyncMode::kNone, threads, 100, true},
        {"sync=none, 1 per write", SyncMode::kNone, threads, 1, true},
    };
    for (const Scenario& s : scenarios) {
      if (!absl::StrContains(s.name, absl::GetFlag(FLAGS_only))) continue;
      PrintWriteRow(
          s.name, s.threads, s.batch,
          delayd::storage::RunWrites(s.mode, s.threads, s.batch, s.pipelined));
    }
    std::printf("\n");
  }
  std::vector<std::string> sizes =
      absl::StrSplit(absl::GetFlag(FLAGS_scan_keys), ',', absl::SkipEmpty());
  if (!sizes.empty()) {
    std::printf(
        "| due keys | store opened | fill s | open s | scan s | open+scan s "
        "| M keys/s scanned |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const std::string& size : sizes) {
      int64_t keys = 0;
      if (!absl::SimpleAtoi(size, &keys) || keys <= 0) {
        std::fprintf(stderr, "bad --scan_keys entry %s\n", size.c_str());
        return 1;
      }
      delayd::storage::RunScan(keys);
    }
  }
  return 0;
}
