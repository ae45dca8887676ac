// herd_store_bench: the store's share of a herd's delivery, without gRPC or
// the server's bookkeeping. It fills a RocksDbJobStore with --jobs jobs of
// one topic due in one millisecond (100-byte payloads, dense ids, batches
// of 1000 as ScheduleBatch writes them), then delivers them as the server
// does, round by round of --round jobs in key order: the records read
// (MultiGet), their attempt marks written (one unsynced Apply), then their
// deletes (one unsynced Apply, as an Ack of the round). Each phase's thread
// CPU is summed; the process's CPU beside it is RocksDB's flushes and
// compactions. Prints one table row per run. With --crowd the herd's
// millisecond is first made a crowd (JobStore::ScanCrowd, as the fire path
// does), so that the deletes leave the due entries to one range deletion
// at the end; the crowd's scan, which counts every entry, is counted with
// the reads (the server scans the millisecond anyway: an upper bound).
//
//   herd_store_bench --dir=/var/tmp --jobs=1000000 --round=1024 [--crowd]
#include <time.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/store/bench_job.h"
#include "storage/rocksdb_job_store.h"

ABSL_FLAG(std::string, dir, "/var/tmp",
          "Parent of the temp database; must be on the real disk.");
ABSL_FLAG(int64_t, jobs, 1'000'000, "Jobs in the herd.");
ABSL_FLAG(int64_t, round, 1024, "Jobs a dispatch round (and an Ack) takes.");
ABSL_FLAG(int, runs, 1, "Runs, each on a fresh database.");
ABSL_FLAG(std::string, marks, "job",
          "Attempt marks: job (one a job, as the server), round (one record "
          "a round), none.");
ABSL_FLAG(bool, due_deletes, true,
          "Delete each job's due entry with its record (as the server).");
ABSL_FLAG(bool, crowd, false,
          "Make the herd a crowd first (ScanCrowd, as the server's fire "
          "path).");

namespace delayd::storage {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

std::string IdOf(int64_t i) { return absl::StrFormat("job-%08d", i); }

void RunOnce(int64_t jobs, int64_t round) {
  std::string path = absl::GetFlag(FLAGS_dir) + "/delayd_herd_store_XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  RocksDbJobStore::Options options;  // the server's defaults
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> opened =
      RocksDbJobStore::Open(path, options);
  Check(opened.status(), "open");
  RocksDbJobStore& store = **opened;

  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const int64_t due_ms = now_ms + 60'000;
  std::vector<Mutation> batch;
  for (int64_t i = 0; i < jobs; ++i) {
    batch.push_back(Mutation::Put(MakeBenchJob(IdOf(i), now_ms, due_ms, 100),
                                  std::nullopt));
    if (batch.size() == 1000 || i + 1 == jobs) {
      Check(store.Apply(batch, Durability::kNoSync), "fill");
      batch.clear();
    }
  }

  double read_s = 0, mark_s = 0, delete_s = 0;
  const double process0 = ProcessCpuSeconds();
  const double thread0 = ThreadCpuSeconds();
  const absl::Time start = absl::Now();
  if (absl::GetFlag(FLAGS_crowd)) {
    const double t = ThreadCpuSeconds();
    Check(store.ScanCrowd(due_ms, [](int64_t, std::string_view,
                                     std::string_view) { return false; }),
          "crowd");
    read_s += ThreadCpuSeconds() - t;
    if (store.crowds() != 1) Check(absl::InternalError("no crowd"), "crowd");
  }
  std::vector<std::string> ids;
  std::vector<JobKeyView> keys;
  std::vector<Mutation> marks, deletes;
  int64_t delivered = 0;
  for (int64_t first = 0; first < jobs; first += round) {
    const int64_t end = std::min(jobs, first + round);
    ids.clear();
    keys.clear();
    marks.clear();
    deletes.clear();
    for (int64_t i = first; i < end; ++i) ids.push_back(IdOf(i));
    for (const std::string& id : ids) keys.push_back({"bench", id});
    double t = ThreadCpuSeconds();
    absl::StatusOr<std::vector<std::optional<JobRecord>>> records =
        store.MultiGet(keys);
    Check(records.status(), "read");
    double u = ThreadCpuSeconds();
    read_s += u - t;
    const std::string mode = absl::GetFlag(FLAGS_marks);
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::optional<JobRecord>& r = (*records)[k];
      if (!r.has_value()) Check(absl::InternalError(ids[k]), "missing");
      if (mode == "job") {
        marks.push_back(Mutation::MarkAttempt("bench", ids[k], due_ms, 1,
                                              r->job().payload().size()));
      }
    }
    if (mode == "round") {
      std::string all;
      for (const std::string& id : ids) absl::StrAppend(&all, id, ",");
      JobRecord rec =
          MakeBenchJob(absl::StrCat("round-", first), now_ms, due_ms, 0);
      rec.mutable_job()->set_payload(all);
      marks.push_back(Mutation::Put(std::move(rec), std::nullopt));
    }
    Check(store.Apply(marks, Durability::kNoSync), "mark");
    t = ThreadCpuSeconds();
    mark_s += t - u;
    for (const std::string& id : ids) {
      deletes.push_back(Mutation::Delete("bench", id,
                                         absl::GetFlag(FLAGS_due_deletes)
                                             ? std::optional<int64_t>(due_ms)
                                             : std::nullopt));
    }
    Check(store.Apply(deletes, Durability::kNoSync), "delete");
    u = ThreadCpuSeconds();
    delete_s += u - t;
    delivered += end - first;
  }
  if (store.crowds() != 0) Check(absl::InternalError("open"), "crowd");
  const double wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  const double thread_s = ThreadCpuSeconds() - thread0;
  const double process_s = ProcessCpuSeconds() - process0;
  Check(store.Close(), "close");
  std::filesystem::remove_all(path);
  const double per = 1e6 / static_cast<double>(delivered);
  std::printf(
      "| %8ld | %5ld | %6.2f | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f |\n",
      static_cast<long>(delivered), static_cast<long>(round), wall_s,
      read_s * per, mark_s * per, delete_s * per, thread_s * per,
      (process_s - thread_s) * per);
  std::fflush(stdout);
}

}  // namespace
}  // namespace delayd::storage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf(
      "| jobs | round | wall s | read µs | mark µs | delete µs | "
      "thread µs | background µs |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
    delayd::storage::RunOnce(absl::GetFlag(FLAGS_jobs),
                             absl::GetFlag(FLAGS_round));
  }
  return 0;
}
