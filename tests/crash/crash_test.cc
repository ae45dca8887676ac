// Crash tests: the real delayd under load from several client threads,
// killed with SIGKILL at random moments and restarted on the same data dir.
// After each restart, what the server shows must agree with every reply the
// clients got (job_model.h): acknowledged writes are there exactly, in-flight
// ones are wholly applied or not at all, and the due index (recovered count,
// GetStats) agrees with the records.
//
// Reproduce a failure with the seed it prints:
//   DELAYD_CRASH_SEED=<seed> crash_test
// DELAYD_CRASH_ROUNDS (default 20) sets the kills of the main test.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/crash/crash_client.h"
#include "tests/crash/crash_env.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::crash {
namespace {

using delayd::testing::DelaydProcess;

constexpr int kClients = 4;

// Everything the clients were told, across rounds.
struct World {
  std::vector<ClientState> clients;
  std::map<Key, State> shared;  // exact at the start of a round
  // Filled by a round, checked after the restart.
  std::map<Key, std::vector<SharedOp>> shared_ops;
  std::vector<std::vector<Key>> unknown_batches;
  int starts = 0;
  // Batches cut by a kill, and how many of them turned out applied.
  int cut_batches = 0;
  int cut_batches_applied = 0;
};

class Verifier {
 public:
  Verifier(const DelaydProcess& process, World& world, int64_t t0_ms,
           std::mt19937_64& rng)
      : process_(process),
        world_(world),
        t0_ms_(t0_ms),
        rng_(rng),
        stub_(v1::DelayQueue::NewStub(process.NewChannel())) {}

  void Run() {
    ASSERT_NO_FATAL_FAILURE(ListEverything());
    CheckRecoveredCount();
    CheckModels();
    CheckSharedKeys();
    CheckUnknownBatches();
    CheckGetJob();
    for (const char* topic : kTopics) {
      CheckStats(topic);
      CheckDueRanges(topic);
    }
  }

 private:
  std::vector<v1::Job> List(const std::string& topic, int64_t due_after_ms,
                            int64_t due_before_ms) {
    std::vector<v1::Job> jobs;
    v1::ListJobsRequest req;
    req.set_topic(topic);
    req.set_page_size(1000);
    req.set_include_payload(true);
    if (due_after_ms >= 0)
      *req.mutable_due_after() = ToProto(absl::FromUnixMillis(due_after_ms));
    if (due_before_ms >= 0)
      *req.mutable_due_before() = ToProto(absl::FromUnixMillis(due_before_ms));
    do {
      v1::ListJobsResponse resp;
      grpc::ClientContext context;
      const grpc::Status status = stub_->ListJobs(&context, req, &resp);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) break;
      jobs.insert(jobs.end(), resp.jobs().begin(), resp.jobs().end());
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return jobs;
  }

  // Jobs that are not live count as absent (CANCELED ones may be kept).
  static bool Live(const v1::Job& job) {
    return job.state() != v1::JOB_STATE_CANCELED &&
           job.state() != v1::JOB_STATE_DONE;
  }

  void ListEverything() {
    for (const char* topic : kTopics) {
      for (v1::Job& job : List(topic, -1, -1)) {
        if (!Live(job)) continue;
        // Nothing subscribes, so a live job is SCHEDULED, or READY when due
        // (fire times are far from "now", see RandomFireAtMs).
        const int64_t due = VersionOf(job).fire_at_ms;
        EXPECT_EQ(job.state(),
                  due < t0_ms_ ? v1::JOB_STATE_READY : v1::JOB_STATE_SCHEDULED)
            << job.ShortDebugString();
        Key key{topic, job.id()};
        ASSERT_TRUE(listed_.emplace(key, std::move(job)).second)
            << "listed twice: " << key.id;
      }
    }
  }

  // "recovered N jobs" of this start: N is the due index's size.
  void CheckRecoveredCount() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (true) {
      const std::string log = process_.Log();
      size_t at = std::string::npos;
      int seen = 0;
      for (size_t p = log.find("delayd: recovered "); p != std::string::npos;
           p = log.find("delayd: recovered ", p + 1)) {
        at = p;
        ++seen;
      }
      if (seen >= world_.starts) {
        ASSERT_EQ(seen, world_.starts) << log;
        int64_t n = -1;
        const size_t begin = at + std::strlen("delayd: recovered ");
        ASSERT_TRUE(absl::SimpleAtoi(
            log.substr(begin, log.find(' ', begin) - begin), &n));
        EXPECT_EQ(n, static_cast<int64_t>(listed_.size()))
            << "the due index and the records disagree";
        return;
      }
      ASSERT_LT(absl::Now(), deadline) << "no recovery line; log:\n" << log;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  State Observed(const Key& key) const {
    auto it = listed_.find(key);
    if (it == listed_.end()) return std::nullopt;
    return VersionOf(it->second);
  }

  void CheckModels() {
    std::set<Key> known;
    for (ClientState& client : world_.clients) {
      for (auto& [key, model] : client.models) {
        known.insert(key);
        const std::string error = model.Observe(Observed(key));
        EXPECT_EQ(error, "") << "(" << key.topic << ", " << key.id << ")";
      }
    }
    for (const auto& [key, state] : world_.shared) known.insert(key);
    for (const auto& [key, job] : listed_) {
      EXPECT_TRUE(known.contains(key))
          << "a job no client scheduled: " << job.ShortDebugString();
    }
  }

  void CheckSharedKeys() {
    for (auto& [key, state] : world_.shared) {
      const std::vector<State> candidates =
          SharedCandidates(state, world_.shared_ops[key]);
      const State observed = Observed(key);
      bool allowed = false;
      std::string allowed_text;
      for (const State& c : candidates) {
        allowed |= c.has_value() == observed.has_value() &&
                   (!c.has_value() || c->SameVisible(*observed));
        absl::StrAppend(&allowed_text, "\n    ", Describe(c));
      }
      EXPECT_TRUE(allowed) << "shared (" << key.topic << ", " << key.id
                           << ") shows " << Describe(observed)
                           << "; the call order allows only:" << allowed_text;
      state = observed;
    }
    world_.shared_ops.clear();
  }

  void CheckUnknownBatches() {
    for (const std::vector<Key>& batch : world_.unknown_batches) {
      size_t present = 0;
      for (const Key& key : batch) present += listed_.contains(key);
      ++world_.cut_batches;
      world_.cut_batches_applied += present > 0;
      EXPECT_TRUE(present == 0 || present == batch.size())
          << "a batch cut at the kill is half-applied: " << present << " of "
          << batch.size() << " new jobs exist (first: " << batch[0].id << ")";
    }
    world_.unknown_batches.clear();
  }

  // GetJob agrees with ListJobs, for every owned and shared key and a
  // sample of the fresh ones.
  void CheckGetJob() {
    std::vector<Key> keys;
    std::vector<Key> fresh;
    for (const ClientState& client : world_.clients) {
      for (const auto& [key, model] : client.models) {
        (key.id[0] == 'f' ? fresh : keys).push_back(key);
      }
    }
    for (const auto& [key, state] : world_.shared) keys.push_back(key);
    std::shuffle(fresh.begin(), fresh.end(), rng_);
    fresh.resize(std::min<size_t>(fresh.size(), 100));
    keys.insert(keys.end(), fresh.begin(), fresh.end());
    for (const Key& key : keys) {
      v1::GetJobRequest req;
      req.mutable_key()->set_topic(key.topic);
      req.mutable_key()->set_id(key.id);
      v1::Job job;
      grpc::ClientContext context;
      const grpc::Status status = stub_->GetJob(&context, req, &job);
      auto it = listed_.find(key);
      if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
          (status.ok() && !Live(job))) {
        EXPECT_TRUE(it == listed_.end())
            << "GetJob does not find listed " << key.id;
        continue;
      }
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_TRUE(it != listed_.end()) << "GetJob finds unlisted " << key.id;
      EXPECT_TRUE(VersionOf(job).SameVisible(VersionOf(it->second)) &&
                  job.state() == it->second.state())
          << "GetJob: " << job.ShortDebugString()
          << "\nListJobs: " << it->second.ShortDebugString();
    }
  }

  // The counts rebuilt from the due index match the records.
  void CheckStats(const std::string& topic) {
    uint64_t live = 0, future = 0;
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    for (const auto& [key, job] : listed_) {
      if (key.topic != topic) continue;
      ++live;
      future += VersionOf(job).fire_at_ms > now_ms;
    }
    v1::GetStatsRequest req;
    req.set_topic(topic);
    v1::GetStatsResponse resp;
    grpc::ClientContext context;
    const grpc::Status status = stub_->GetStats(&context, req, &resp);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(resp.topics_size(), 1);
    const v1::TopicStats& s = resp.topics(0);
    EXPECT_EQ(s.scheduled() + s.ready() + s.in_flight(), live)
        << topic << ": " << s.ShortDebugString();
    EXPECT_EQ(s.due_next_day(), future) << s.ShortDebugString();
    EXPECT_EQ(s.due_next_hour(), future) << s.ShortDebugString();
    EXPECT_EQ(s.due_next_minute(), 0u) << s.ShortDebugString();
  }

  // ListJobs with a due range shows exactly the jobs whose due time (as
  // listed and as GetJob shows it) lies in the range.
  void CheckDueRanges(const std::string& topic) {
    for (int i = 0; i < 3; ++i) {
      int64_t a = RandomFireAtMs(rng_, t0_ms_);
      int64_t b = RandomFireAtMs(rng_, t0_ms_);
      if (a > b) std::swap(a, b);
      std::set<std::string> want, got;
      for (const auto& [key, job] : listed_) {
        const int64_t due = VersionOf(job).fire_at_ms;
        if (key.topic == topic && a <= due && due < b) want.insert(key.id);
      }
      for (const v1::Job& job : List(topic, a, b)) {
        if (Live(job)) got.insert(job.id());
      }
      EXPECT_EQ(got, want) << topic << " due in [" << a << ", " << b << ")";
    }
  }

  const DelaydProcess& process_;
  World& world_;
  const int64_t t0_ms_;
  std::mt19937_64& rng_;
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  std::map<Key, v1::Job> listed_;  // live jobs only
};

// Starts (or restarts) delayd on `dir` and checks it against the world.
std::unique_ptr<DelaydProcess> StartAndVerify(
    const std::vector<std::string>& args, const std::string& dir, World& world,
    int64_t t0_ms, std::mt19937_64& rng) {
  absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
      DelaydProcess::Start(args, dir, absl::Seconds(120));
  EXPECT_OK(process);
  if (!process.ok()) return nullptr;
  ++world.starts;
  (*process)->KeepDir();
  Verifier(**process, world, t0_ms, rng).Run();
  return *std::move(process);
}

// `rounds` times: load from kClients threads, SIGKILL after a random delay,
// restart, verify. Then a clean SIGTERM restart, verified too.
void RunKillRounds(const std::vector<std::string>& args, int rounds,
                   uint64_t seed) {
  SCOPED_TRACE(absl::StrCat("DELAYD_CRASH_SEED=", seed));
  std::mt19937_64 rng(seed);
  const std::string dir = delayd::testing::MakeTempDir();
  const int64_t t0_ms = absl::ToUnixMillis(absl::Now());
  World world;
  for (int i = 0; i < kClients; ++i) world.clients.emplace_back(i);
  for (const char* topic : kTopics) {
    for (int n = 0; n < kSharedPerTopic; ++n) {
      world.shared[{topic, absl::StrCat("s-", n)}] = std::nullopt;
    }
  }
  int64_t calls = 0, unknown = 0, streams = 0, broken_streams = 0;
  std::unique_ptr<DelaydProcess> process =
      StartAndVerify(args, dir, world, t0_ms, rng);
  for (int round = 0; round < rounds && process != nullptr; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::atomic<bool> killed{false};
    std::vector<std::thread> threads;
    for (ClientState& client : world.clients) {
      threads.emplace_back(RunClient, process->NewChannel(), rng(), t0_ms,
                           std::cref(killed), std::ref(client));
    }
    absl::SleepFor(
        absl::Milliseconds(std::uniform_int_distribution<int>(20, 300)(rng)));
    killed = true;
    process->Signal(SIGKILL);
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(process->Wait().value_or(-1), 128 + SIGKILL)
        << "delayd died before the kill; log:\n"
        << process->Log();
    process.reset();
    for (ClientState& client : world.clients) {
      for (const std::string& f : client.failures) ADD_FAILURE() << f;
      client.failures.clear();
      calls += client.calls;
      unknown += client.unknown_calls;
      streams += client.streams;
      broken_streams += client.broken_streams;
      client.calls = client.unknown_calls = 0;
      client.streams = client.broken_streams = 0;
      for (SharedOp& op : client.shared_ops) {
        world.shared_ops[op.key].push_back(std::move(op));
      }
      client.shared_ops.clear();
      for (auto& batch : client.unknown_batches) {
        if (!batch.empty()) world.unknown_batches.push_back(std::move(batch));
      }
      client.unknown_batches.clear();
    }
    process = StartAndVerify(args, dir, world, t0_ms, rng);
    if (::testing::Test::HasFailure()) break;
  }
  if (process != nullptr && !::testing::Test::HasFailure()) {
    // A clean shutdown flushes the memtables; the next start reads SSTs.
    process->Signal(SIGTERM);
    EXPECT_EQ(process->Wait().value_or(-1), 0) << process->Log();
    process = StartAndVerify(args, dir, world, t0_ms, rng);
  }
  std::cout << "[ crash    ] seed " << seed << ": " << world.starts - 1
            << " restarts, " << calls << " calls, " << unknown
            << " with unknown outcome; " << world.cut_batches
            << " batches cut by a kill, " << world.cut_batches_applied
            << " of them applied (wholly); " << streams << " ScheduleStreams, "
            << broken_streams << " of them broken\n";
  process.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(CrashTest, AcknowledgedWritesSurviveSigkill) {
  RunKillRounds({}, CrashRounds(20), CrashSeed());
}

// --sync=none skips the fsync but still writes the WAL through the OS, so a
// process kill (not a power loss) loses nothing either.
TEST(CrashTest, AcknowledgedWritesSurviveSigkillWithSyncNone) {
  RunKillRounds({"--sync=none"}, std::max(2, CrashRounds(20) / 4),
                CrashSeed() + 1);
}

}  // namespace
}  // namespace delayd::crash
