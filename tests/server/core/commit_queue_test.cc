// CommitQueue: the writes queued while one is under way share the next
// store write; a failed batch is written again one by one, so that only
// the bad write fails; callbacks run in submission order, each only after
// its synced write returned; the destructor answers everything queued.
#include "server/core/commit_queue.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/forwarding_job_store.h"
#include "storage/in_memory_job_store.h"
#include "storage/job_record.h"
#include "storage/mutation.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

storage::Mutation PutOf(const std::string& id) {
  storage::JobRecord record;
  v1::Job& job = *record.mutable_job();
  job.set_topic("t");
  job.set_id(id);
  job.set_state(v1::JOB_STATE_SCHEDULED);
  *job.mutable_fire_at() = storage::UnixMsToTimestamp(1'000);
  return storage::Mutation::Put(std::move(record), std::nullopt);
}

// Holds every Apply until Release, and records the size of each.
class GatedStore : public storage::ForwardingJobStore {
 public:
  using ForwardingJobStore::ForwardingJobStore;

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override {
    {
      absl::MutexLock lock(&mu_);
      sizes_.push_back(mutations.size());
      durabilities_.push_back(durability);
      mu_.Await(absl::Condition(&open_));
    }
    return ForwardingJobStore::Apply(mutations, durability);
  }

  void Release() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits until `n` Applies have begun.
  void AwaitApplies(size_t n) {
    absl::MutexLock lock(&mu_);
    auto begun = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return sizes_.size() >= n;
    };
    mu_.Await(absl::Condition(&begun));
  }
  std::vector<size_t> sizes() {
    absl::MutexLock lock(&mu_);
    return sizes_;
  }
  std::vector<storage::Durability> durabilities() {
    absl::MutexLock lock(&mu_);
    return durabilities_;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<storage::Durability> durabilities_ ABSL_GUARDED_BY(mu_);
};

// What the callbacks saw, in the order they ran.
struct Answers {
  absl::Mutex mu;
  std::vector<std::string> ids ABSL_GUARDED_BY(mu);
  std::vector<absl::StatusCode> codes ABSL_GUARDED_BY(mu);

  CommitQueue::Done Record() {
    return [this](absl::Status status, storage::Mutation&& m) {
      absl::MutexLock lock(&mu);
      ids.emplace_back(m.id());
      codes.push_back(status.code());
    };
  }
  void AwaitCount(size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return ids.size() >= n;
    };
    mu.Await(absl::Condition(&enough));
  }
};

TEST(CommitQueueTest, WritesQueuedDuringAWriteShareTheNext) {
  storage::InMemoryJobStore memory;
  GatedStore store(memory);
  Answers answers;
  {
    CommitQueue queue(&store, storage::Durability::kSync);
    queue.Submit(PutOf("a"), answers.Record());
    store.AwaitApplies(1);  // "a" is being written, alone
    queue.Submit(PutOf("b"), answers.Record());
    queue.Submit(PutOf("c"), answers.Record());
    queue.Submit(PutOf("d"), answers.Record());
    store.Release();
    answers.AwaitCount(4);
    EXPECT_EQ(queue.writes(), 2);
    EXPECT_EQ(queue.written(), 4);
  }
  EXPECT_THAT(store.sizes(), ElementsAre(1, 3));
  EXPECT_THAT(store.durabilities(), ElementsAre(storage::Durability::kSync,
                                                storage::Durability::kSync));
  absl::MutexLock lock(&answers.mu);
  EXPECT_THAT(answers.ids, ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(answers.codes,
              ElementsAre(absl::StatusCode::kOk, absl::StatusCode::kOk,
                          absl::StatusCode::kOk, absl::StatusCode::kOk));
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_OK_AND_ASSIGN(std::optional<storage::JobRecord> got,
                         memory.Get("t", id));
    EXPECT_TRUE(got.has_value()) << id;
  }
}

TEST(CommitQueueTest, AFailedBatchIsWrittenAgainOneByOne) {
  storage::InMemoryJobStore memory;
  GatedStore store(memory);
  Answers answers;
  {
    CommitQueue queue(&store, storage::Durability::kNoSync);
    queue.Submit(PutOf("first"), answers.Record());
    store.AwaitApplies(1);
    queue.Submit(PutOf("ok-1"), answers.Record());
    // The store refuses this one (an attempt mark of a job with no due
    // entry), and with it the batch it is in.
    queue.Submit(storage::Mutation::MarkAttempt("t", "absent", 5'000, 1, 0),
                 answers.Record());
    queue.Submit(PutOf("ok-2"), answers.Record());
    store.Release();
    answers.AwaitCount(4);
  }
  // first alone; then the batch of three, failed; then each of the three.
  EXPECT_THAT(store.sizes(), ElementsAre(1, 3, 1, 1, 1));
  absl::MutexLock lock(&answers.mu);
  EXPECT_THAT(answers.ids, ElementsAre("first", "ok-1", "absent", "ok-2"));
  ASSERT_THAT(answers.codes, SizeIs(4));
  EXPECT_EQ(answers.codes[0], absl::StatusCode::kOk);
  EXPECT_EQ(answers.codes[1], absl::StatusCode::kOk);
  EXPECT_NE(answers.codes[2], absl::StatusCode::kOk);
  EXPECT_EQ(answers.codes[3], absl::StatusCode::kOk);
  for (const char* id : {"first", "ok-1", "ok-2"}) {
    ASSERT_OK_AND_ASSIGN(std::optional<storage::JobRecord> got,
                         memory.Get("t", id));
    EXPECT_TRUE(got.has_value()) << id;
  }
}

TEST(CommitQueueTest, TheDestructorWritesAndAnswersWhatIsQueued) {
  storage::InMemoryJobStore memory;
  GatedStore store(memory);
  Answers answers;
  {
    CommitQueue queue(&store, storage::Durability::kSync);
    queue.Submit(PutOf("a"), answers.Record());
    store.AwaitApplies(1);
    queue.Submit(PutOf("b"), answers.Record());
    store.Release();
  }  // destroyed with "b" possibly still queued
  absl::MutexLock lock(&answers.mu);
  EXPECT_THAT(answers.ids, ElementsAre("a", "b"));
  ASSERT_OK_AND_ASSIGN(std::optional<storage::JobRecord> got,
                       memory.Get("t", "b"));
  EXPECT_TRUE(got.has_value());
}

// Records the ids of each Apply once it has returned, synced or not.
class SyncTrackingStore : public storage::ForwardingJobStore {
 public:
  using ForwardingJobStore::ForwardingJobStore;

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override {
    absl::Status s = ForwardingJobStore::Apply(mutations, durability);
    absl::MutexLock lock(&mu_);
    for (const storage::Mutation& m : mutations) {
      (durability == storage::Durability::kSync ? synced_ : unsynced_)
          .insert(std::string(m.id()));
    }
    return s;
  }
  bool Synced(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return synced_.contains(id) && !unsynced_.contains(id);
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> synced_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> unsynced_ ABSL_GUARDED_BY(mu_);
};

// Many submitters at once, most of them followers waiting while another's
// batch syncs: each gets OK only once a synced write holding its mutation
// has returned.
TEST(CommitQueueTest, NoCallerIsAnsweredBeforeItsWriteIsSynced) {
  storage::InMemoryJobStore memory;
  SyncTrackingStore tracking(memory);
  GatedStore store(tracking);
  constexpr int kThreads = 8, kEach = 200;
  std::atomic<int> answered{0}, early{0};
  auto check = [&](absl::Status status, storage::Mutation&& m) {
    if (!status.ok() || !tracking.Synced(std::string(m.id()))) ++early;
    ++answered;
  };
  {
    CommitQueue queue(&store, storage::Durability::kSync);
    queue.Submit(PutOf("first"), check);
    store.AwaitApplies(1);  // held: the rest queue behind it
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          queue.Submit(PutOf(absl::StrCat(t, "-", i)), check);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(answered, 0);
    store.Release();
  }
  EXPECT_EQ(answered, kThreads * kEach + 1);
  EXPECT_EQ(early, 0);
  // The 1,600 followers shared the writes after the first.
  EXPECT_LT(store.sizes().size(), 1 + kThreads * kEach);
}

}  // namespace
}  // namespace delayd::server
