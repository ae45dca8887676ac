// WorkLoop: tasks run before dispatch rounds, and a topic kicked many times
// before its round is dispatched once.
#include "server/delivery/work_loop.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;

class WorkLoopTest : public ::testing::Test {
 protected:
  WorkLoopTest()
      : loop_([this](const std::string& topic) { Note("dispatch " + topic); }) {
  }

  void Note(std::string event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // Polls (real time: the loop is a real thread) until it is idle.
  bool AwaitIdle() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!loop_.Idle()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  WorkLoop loop_;
};

TEST_F(WorkLoopTest, TasksFirstThenEachDirtyTopicOnce) {
  // Queued before Start: all of it waits, then runs in this order.
  loop_.Kick("a");
  loop_.Kick("b");
  loop_.Kick("a");
  loop_.Run([this] { Note("task 1"); });
  loop_.Run([this] { Note("task 2"); });
  EXPECT_FALSE(loop_.Idle());
  loop_.Start();
  ASSERT_TRUE(AwaitIdle());
  EXPECT_THAT(Events(),
              ElementsAre("task 1", "task 2", "dispatch a", "dispatch b"));
  loop_.Kick("a");  // dispatched again once its round has run
  ASSERT_TRUE(AwaitIdle());
  EXPECT_EQ(Events().back(), "dispatch a");
  EXPECT_EQ(Events().size(), 5u);
}

TEST_F(WorkLoopTest, StopDropsWhatIsStillQueued) {
  loop_.Run([this] { Note("never"); });
  loop_.Stop();
  loop_.Stop();  // idempotent
  EXPECT_TRUE(Events().empty());
}

}  // namespace
}  // namespace delayd::server
