// TerminalStateCounter: the background count of DEAD, DONE and CANCELED
// records stays exact while jobs change under it, and after a scan that
// failed part way is run again.
#include "server/jobs/terminal_state_counter.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "storage/forwarding_job_store.h"
#include "storage/in_memory_job_store.h"
#include "storage/job_record.h"
#include "storage/mutation.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

storage::JobRecord Record(const std::string& id, v1::JobState state) {
  storage::JobRecord record;
  record.mutable_job()->set_topic("t");
  record.mutable_job()->set_id(id);
  record.mutable_job()->set_state(state);
  *record.mutable_job()->mutable_fire_at() =
      storage::UnixMsToTimestamp(1'700'000'000'000);
  return record;
}

// An InMemoryJobStore whose ScanJobs of one topic fails (UNAVAILABLE) the
// next `n` times: a scan that has counted the topics before it fails part
// way. Everything else passes through.
class FailingTopicStore final : public storage::ForwardingJobStore {
 public:
  FailingTopicStore() : ForwardingJobStore(memory_) {}

  void FailScanJobs(std::string topic, int n) {
    fail_topic_ = std::move(topic);
    fail_count_ = n;
  }

  absl::Status ScanJobs(std::string_view topic, std::string_view id_prefix,
                        std::string_view start_after_id,
                        JobVisitor visitor) const override {
    if (topic == fail_topic_ && fail_count_ > 0) {
      --fail_count_;
      return absl::UnavailableError("injected read error");
    }
    return ForwardingJobStore::ScanJobs(topic, id_prefix, start_after_id,
                                        visitor);
  }

 private:
  // Constructed after the base, which only keeps a reference to it.
  storage::InMemoryJobStore memory_;
  std::string fail_topic_;
  mutable int fail_count_ = 0;
};

// A writer has written a DEAD job as SCHEDULED (a redrive) and holds its key
// lock, but has not yet noted the change, when the scan reads the store: the
// scan sees no DEAD job. It must not end (and stop tracking) before the
// writer notes it, or the writer's -1 meets no +1 and the count ends at -1
// instead of 0. (DelivererTest.DeadCountScanIsExactWhileJobsChange failed a
// third of its runs this way.)
TEST(TerminalStateCounterTest, AScanWaitsForTheNoteOfAWriteItSaw) {
  storage::InMemoryJobStore store;
  const storage::Mutation dead =
      storage::Mutation::Put(Record("d", v1::JOB_STATE_DEAD), std::nullopt);
  ASSERT_OK(store.Apply({&dead, 1}, storage::Durability::kSync));
  TopicTable topics;
  KeyLocks locks;
  TerminalStateCounter counter(&topics);

  auto guard = std::make_unique<KeyLocks::Guard>(locks, KeyHash("t", "d"));
  const storage::Mutation redrive = storage::Mutation::Put(
      Record("d", v1::JOB_STATE_SCHEDULED), std::nullopt);
  ASSERT_OK(store.Apply({&redrive, 1}, storage::Durability::kSync));

  std::atomic<bool> stop{false};
  absl::Notification scanned;
  std::vector<JobKey> canceled;
  std::thread scan([&] {
    EXPECT_OK(counter.Scan(store, locks, stop, canceled));
    scanned.Notify();
  });
  // With the bug the scan ends here at once; it must wait for the lock.
  EXPECT_FALSE(scanned.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  counter.NoteChange("t", "d", v1::JOB_STATE_DEAD, v1::JOB_STATE_SCHEDULED);
  guard.reset();
  scan.join();
  EXPECT_EQ(topics.CountsOf("t").dead, 0);
}

TEST(TerminalStateCounterTest, CountsWhatTheScanFindsAndWhatChangedMeanwhile) {
  storage::InMemoryJobStore store;
  std::vector<storage::Mutation> puts;
  puts.push_back(
      storage::Mutation::Put(Record("a", v1::JOB_STATE_DEAD), std::nullopt));
  puts.push_back(
      storage::Mutation::Put(Record("b", v1::JOB_STATE_DONE), std::nullopt));
  puts.push_back(storage::Mutation::Put(Record("c", v1::JOB_STATE_SCHEDULED),
                                        std::nullopt));
  ASSERT_OK(store.Apply(puts, storage::Durability::kSync));
  TopicTable topics;
  KeyLocks locks;
  TerminalStateCounter counter(&topics);
  // Before the scan: c goes DEAD (noted), so the scan finds two DEAD jobs.
  const storage::Mutation c_dead = storage::Mutation::Put(
      Record("c", v1::JOB_STATE_DEAD),
      storage::DueIndexEntryOf(Record("c", v1::JOB_STATE_SCHEDULED)));
  ASSERT_OK(store.Apply({&c_dead, 1}, storage::Durability::kSync));
  counter.NoteChange("t", "c", v1::JOB_STATE_SCHEDULED, v1::JOB_STATE_DEAD);
  std::atomic<bool> stop{false};
  std::vector<JobKey> canceled;
  ASSERT_OK(counter.Scan(store, locks, stop, canceled));
  EXPECT_EQ(topics.CountsOf("t").dead, 2);
  EXPECT_EQ(topics.CountsOf("t").done, 1);
  // After the scan, Notes apply directly.
  counter.NoteChange("t", "a", v1::JOB_STATE_DEAD, v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(topics.CountsOf("t").dead, 1);
}

// Issue 17: a scan that failed on a read error ended the tracking of the
// changes made meanwhile; it was not to be called again, and its counts
// stayed too low until a restart. Now a failed scan counts nothing yet and
// can be run again: the second run counts every job once — those the first
// run had read before failing too — and honours what changed in between.
TEST(TerminalStateCounterTest, AScanThatFailedPartWayCanRunAgainExactly) {
  FailingTopicStore store;
  std::vector<storage::Mutation> puts;
  puts.push_back(
      storage::Mutation::Put(Record("a", v1::JOB_STATE_DEAD), std::nullopt));
  puts.push_back(
      storage::Mutation::Put(Record("b", v1::JOB_STATE_DONE), std::nullopt));
  storage::JobRecord in_u = Record("c", v1::JOB_STATE_DEAD);
  in_u.mutable_job()->set_topic("u");
  puts.push_back(storage::Mutation::Put(in_u, std::nullopt));
  in_u.mutable_job()->set_id("d");
  in_u.mutable_job()->set_state(v1::JOB_STATE_CANCELED);
  puts.push_back(storage::Mutation::Put(in_u, std::nullopt));
  ASSERT_OK(store.Apply(puts, storage::Durability::kSync));
  TopicTable topics;
  KeyLocks locks;
  TerminalStateCounter counter(&topics);
  std::atomic<bool> stop{false};

  // The first run reads topic t, then fails on u.
  store.FailScanJobs("u", 1);
  std::vector<JobKey> canceled;
  EXPECT_EQ(counter.Scan(store, locks, stop, canceled).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(topics.CountsOf("t").dead, 0);
  EXPECT_EQ(topics.CountsOf("t").done, 0);
  // Meanwhile t/a, DEAD when the counter was made, is redriven.
  const storage::Mutation redrive = storage::Mutation::Put(
      Record("a", v1::JOB_STATE_SCHEDULED), std::nullopt);
  ASSERT_OK(store.Apply({&redrive, 1}, storage::Durability::kSync));
  counter.NoteChange("t", "a", v1::JOB_STATE_DEAD, v1::JOB_STATE_SCHEDULED);

  canceled.clear();
  ASSERT_OK(counter.Scan(store, locks, stop, canceled));
  EXPECT_EQ(topics.CountsOf("t").dead, 0);
  EXPECT_EQ(topics.CountsOf("t").done, 1);
  EXPECT_EQ(topics.CountsOf("u").dead, 1);
  EXPECT_EQ(topics.CountsOf("u").canceled, 1);
  ASSERT_EQ(canceled.size(), 1u);
  EXPECT_EQ(canceled[0], (JobKey{"u", "d"}));
  // After the scan, Notes apply directly.
  counter.NoteChange("u", "c", v1::JOB_STATE_DEAD, v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(topics.CountsOf("u").dead, 0);
}

}  // namespace
}  // namespace delayd::server
