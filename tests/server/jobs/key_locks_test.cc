// KeyLocks: a Guard waits only for a Guard holding one of the same hashes.
#include "server/jobs/key_locks.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace delayd::server {
namespace {

// Runs `lock` on a thread; returns whether it got through within `wait`.
bool GetsThrough(std::function<void()> lock, absl::Duration wait,
                 std::thread& thread, absl::Notification& done) {
  thread = std::thread([lock = std::move(lock), &done] {
    lock();
    done.Notify();
  });
  return done.WaitForNotificationWithTimeout(wait);
}

TEST(KeyLocksTest, DisjointBatchesDoNotWaitForEachOther) {
  KeyLocks locks;
  // With 4096 striped mutexes two batches like these nearly always shared a
  // stripe; now only equal hashes conflict.
  std::vector<uint64_t> acks, dispatch;
  for (uint64_t i = 0; i < 1000; ++i) acks.push_back(2 * i);
  for (uint64_t i = 0; i < 1000; ++i) dispatch.push_back(2 * i + 1);
  KeyLocks::Guard held(locks, acks);
  std::thread thread;
  absl::Notification done;
  EXPECT_TRUE(GetsThrough([&] { KeyLocks::Guard g(locks, dispatch); },
                          absl::Seconds(10), thread, done));
  thread.join();
  EXPECT_EQ(locks.HeldForTesting(), 1000u);
}

TEST(KeyLocksTest, OverlappingBatchWaitsForTheRelease) {
  KeyLocks locks;
  std::thread thread;
  absl::Notification done;
  std::atomic<bool> released{false};
  bool waited_for_release = false;
  {
    KeyLocks::Guard held(locks, std::vector<uint64_t>{1, 2, 3});
    const bool early = GetsThrough(
        [&] {
          KeyLocks::Guard g(locks, std::vector<uint64_t>{9, 3, 7});
          waited_for_release = released.load();
        },
        absl::Milliseconds(200), thread, done);
    EXPECT_FALSE(early) << "a batch sharing hash 3 got the lock while held";
    released = true;
  }
  done.WaitForNotification();
  thread.join();
  EXPECT_TRUE(waited_for_release);
  EXPECT_EQ(locks.HeldForTesting(), 0u);
}

TEST(KeyLocksTest, RepeatedHashesInOneGuardAreOneLock) {
  KeyLocks locks;
  {
    KeyLocks::Guard g(locks, std::vector<uint64_t>{5, 5, 5, 6});
    EXPECT_EQ(locks.HeldForTesting(), 2u);
  }
  EXPECT_EQ(locks.HeldForTesting(), 0u);
  KeyLocks::Guard again(locks, 5);  // released entirely: no self-deadlock
  EXPECT_EQ(locks.HeldForTesting(), 1u);
}

TEST(KeyLocksTest, ContendedGuardsSerializeEachKey) {
  KeyLocks locks;
  // Threads take overlapping batches and bump a plain counter per hash:
  // a lost update would mean two holders at once.
  constexpr int kThreads = 4, kRounds = 2000, kKeys = 8;
  std::vector<int> counters(kKeys, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t a = (t + r) % kKeys, b = (t * 3 + r * 5) % kKeys;
        KeyLocks::Guard g(locks, std::vector<uint64_t>{a, b});
        // Read, yield, write: a second holder in between loses an update.
        const int va = counters[a];
        std::this_thread::yield();
        counters[a] = va + 1;
        if (b != a) ++counters[b];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  int total = 0;
  for (int c : counters) total += c;
  int expected = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int r = 0; r < kRounds; ++r) {
      expected += (t + r) % kKeys == (t * 3 + r * 5) % kKeys ? 1 : 2;
    }
  }
  EXPECT_EQ(total, expected);
}

TEST(KeyLocksTest, TryLockTakesAFreeLockAndNeverWaitsForAHeldOne) {
  KeyLocks locks;
  {
    KeyLocks::Guard held(locks, 7);
    EXPECT_EQ(locks.TryLock(7), nullptr);  // held: no wait, no lock
    EXPECT_EQ(locks.HeldForTesting(), 1u);
    std::unique_ptr<KeyLocks::Guard> other = locks.TryLock(8);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(locks.HeldForTesting(), 2u);
  }
  EXPECT_EQ(locks.HeldForTesting(), 0u);
  std::unique_ptr<KeyLocks::Guard> taken = locks.TryLock(7);
  ASSERT_NE(taken, nullptr);
  // Given back on another thread, as the CommitQueue's finisher does.
  std::thread([&] { taken.reset(); }).join();
  EXPECT_EQ(locks.HeldForTesting(), 0u);
  KeyLocks::Guard again(locks, 7);  // free again: does not wait
}

}  // namespace
}  // namespace delayd::server
