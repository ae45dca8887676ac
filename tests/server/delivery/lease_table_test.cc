// LeaseTable: each lease has one timer in the Scheduler, tagged with a
// sequence number that names exactly one arming of it.
#include "server/delivery/lease_table.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/timer/fake_clock.h"

namespace delayd::server {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr absl::Duration kPatience = absl::Seconds(10);

class LeaseTableTest : public ::testing::Test {
 protected:
  LeaseTableTest()
      : scheduler_(&clock_,
                   [this](std::vector<timer::TimerEntry> fired) {
                     absl::MutexLock lock(&mu_);
                     for (const timer::TimerEntry& e : fired) {
                       fired_.push_back(e.tag);
                     }
                   }),
        table_(&scheduler_) {}
  ~LeaseTableTest() override { scheduler_.Stop(); }

  static LeaseTable::Lease LeaseUntil(int64_t deadline_ms) {
    LeaseTable::Lease lease;
    lease.subscriber = 1;
    lease.nonce = 77;
    lease.check = 99;
    lease.attempt = 2;
    lease.deadline_ms = deadline_ms;
    return lease;
  }

  std::vector<uint64_t> Fired() {
    absl::MutexLock lock(&mu_);
    return fired_;
  }

  timer::FakeClock clock_{kT0};
  absl::Mutex mu_;
  std::vector<uint64_t> fired_ ABSL_GUARDED_BY(mu_);
  timer::Scheduler scheduler_;
  LeaseTable table_;
};

TEST_F(LeaseTableTest, AddArmsATimerTaggedWithTheLeasesSequence) {
  const JobKey key{"t", "a"};
  table_.Add(key, LeaseUntil(kT0 + 1000));
  ASSERT_NE(table_.Find(key), nullptr);
  const uint64_t seq = table_.Find(key)->seq;
  EXPECT_NE(seq, 0u);
  ASSERT_NE(table_.KeysOf(seq), nullptr);
  EXPECT_EQ(*table_.KeysOf(seq), std::vector<JobKey>{key});
  EXPECT_EQ(scheduler_.size(), 1u);
  EXPECT_TRUE(table_.IsCurrent(key, 77, 99, 2));
  EXPECT_FALSE(table_.IsCurrent(key, 77, 99, 3));
  EXPECT_FALSE(table_.IsCurrent(key, 78, 99, 2));
  EXPECT_FALSE(table_.IsCurrent(key, 77, 98, 2));
  EXPECT_FALSE(table_.IsCurrent(key, 77, 0, 2));  // a version 1 token
  EXPECT_FALSE(table_.IsCurrent({"t", "b"}, 77, 99, 2));
}

TEST_F(LeaseTableTest, RemoveCancelsTheTimerAndForgetsTheSequence) {
  const JobKey key{"t", "a"};
  table_.Add(key, LeaseUntil(kT0 + 1000));
  const uint64_t seq = table_.Find(key)->seq;
  std::optional<LeaseTable::Lease> removed = table_.Remove(key);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->nonce, 77u);
  EXPECT_EQ(scheduler_.size(), 0u);
  EXPECT_EQ(table_.KeysOf(seq), nullptr);
  EXPECT_FALSE(table_.Contains(key));
  EXPECT_FALSE(table_.Remove(key).has_value());
}

TEST_F(LeaseTableTest, RearmMovesAPendingTimerUnderTheSameSequence) {
  const JobKey key{"t", "a"};
  table_.Add(key, LeaseUntil(kT0 + 1000));
  LeaseTable::Lease* lease = table_.Find(key);
  const uint64_t seq = lease->seq;
  table_.Rearm(key, *lease, kT0 + 5000);
  EXPECT_EQ(lease->seq, seq);
  EXPECT_EQ(scheduler_.size(), 1u);
}

TEST_F(LeaseTableTest, RearmAfterTheTimerFiredTakesANewSequence) {
  scheduler_.Start();
  const JobKey key{"t", "a"};
  table_.Add(key, LeaseUntil(kT0 + 1000));
  const uint64_t first = table_.Find(key)->seq;
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 1000, kPatience));
  clock_.SetMs(kT0 + 1000);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  ASSERT_EQ(Fired(), std::vector<uint64_t>{kLeaseTagBit | first});
  // An extension that comes after the expiry fired: the expiry, when it
  // runs, must find the lease under another sequence.
  LeaseTable::Lease* lease = table_.Find(key);
  table_.Rearm(key, *lease, kT0 + 9000);
  EXPECT_NE(lease->seq, first);
  EXPECT_EQ(table_.KeysOf(first), nullptr);
  ASSERT_NE(table_.KeysOf(lease->seq), nullptr);
  EXPECT_EQ(scheduler_.size(), 1u);
  // ArmAgain keeps the sequence (an expiry that must try again).
  const uint64_t second = lease->seq;
  table_.ArmAgain(*lease, kT0 + 10'000);
  EXPECT_EQ(lease->seq, second);
  EXPECT_EQ(scheduler_.size(), 1u);
}

// A dispatch round's leases of one deadline: one sequence, one timer, which
// goes with the last of them.
TEST_F(LeaseTableTest, SharedLeasesHaveOneTimerThatEndsWithTheLastOfThem) {
  const std::vector<JobKey> keys = {{"t", "a"}, {"t", "b"}, {"t", "c"}};
  const std::vector<LeaseTable::Lease> leases(3, LeaseUntil(kT0 + 1000));
  table_.AddShared(keys, leases);
  const uint64_t seq = table_.Find(keys[0])->seq;
  EXPECT_NE(seq, 0u);
  for (const JobKey& key : keys) {
    ASSERT_NE(table_.Find(key), nullptr);
    EXPECT_EQ(table_.Find(key)->seq, seq);
    EXPECT_TRUE(table_.IsCurrent(key, 77, 99, 2));
  }
  ASSERT_NE(table_.KeysOf(seq), nullptr);
  EXPECT_EQ(*table_.KeysOf(seq), keys);
  EXPECT_EQ(scheduler_.size(), 1u);
  ASSERT_TRUE(table_.Remove(keys[1]).has_value());
  ASSERT_TRUE(table_.Remove(keys[0]).has_value());
  EXPECT_EQ(scheduler_.size(), 1u);  // c's deadline still stands
  ASSERT_NE(table_.KeysOf(seq), nullptr);
  ASSERT_TRUE(table_.Remove(keys[2]).has_value());
  EXPECT_EQ(scheduler_.size(), 0u);
  EXPECT_EQ(table_.KeysOf(seq), nullptr);
}

// An extended lease leaves its round's timer for one of its own; the round's
// timer still fires at its time for the others.
TEST_F(LeaseTableTest, ExtendingASharedLeaseGivesItATimerOfItsOwn) {
  scheduler_.Start();
  const std::vector<JobKey> keys = {{"t", "a"}, {"t", "b"}};
  const std::vector<LeaseTable::Lease> leases(2, LeaseUntil(kT0 + 1000));
  table_.AddShared(keys, leases);
  const uint64_t shared = table_.Find(keys[0])->seq;
  LeaseTable::Lease* b = table_.Find(keys[1]);
  b->deadline_ms = kT0 + 5000;
  table_.Rearm(keys[1], *b, kT0 + 5000);
  const uint64_t own = b->seq;
  EXPECT_NE(own, shared);
  EXPECT_EQ(table_.Find(keys[0])->seq, shared);
  EXPECT_EQ(scheduler_.size(), 2u);
  ASSERT_NE(table_.KeysOf(own), nullptr);
  EXPECT_EQ(*table_.KeysOf(own), std::vector<JobKey>{keys[1]});
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 1000, kPatience));
  clock_.SetMs(kT0 + 1000);
  const absl::Time deadline = absl::Now() + kPatience;
  while (Fired().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(Fired(), std::vector<uint64_t>{kLeaseTagBit | shared});
  clock_.SetMs(kT0 + 4999);
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 5000, kPatience));
  EXPECT_EQ(Fired(), std::vector<uint64_t>{kLeaseTagBit | shared});
  clock_.SetMs(kT0 + 5000);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  EXPECT_EQ(Fired(),
            (std::vector<uint64_t>{kLeaseTagBit | shared, kLeaseTagBit | own}));
  // a's removal ends the shared sequence (its timer fired already); b's
  // own stays until b ends.
  ASSERT_TRUE(table_.Remove(keys[0]).has_value());
  EXPECT_EQ(table_.KeysOf(shared), nullptr);
  EXPECT_NE(table_.KeysOf(own), nullptr);
}

// An expiry that must try again re-arms the fired round's timer once, under
// the same sequence, for all its leases.
TEST_F(LeaseTableTest, ArmAgainOfAFiredRoundArmsOneTimerUnderItsSequence) {
  scheduler_.Start();
  const std::vector<JobKey> keys = {{"t", "a"}, {"t", "b"}, {"t", "c"}};
  const std::vector<LeaseTable::Lease> leases(3, LeaseUntil(kT0 + 1000));
  table_.AddShared(keys, leases);
  const uint64_t seq = table_.Find(keys[0])->seq;
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 1000, kPatience));
  clock_.SetMs(kT0 + 1000);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  ASSERT_EQ(Fired(), std::vector<uint64_t>{kLeaseTagBit | seq});
  EXPECT_EQ(scheduler_.size(), 0u);
  for (const JobKey& key : keys) {
    table_.ArmAgain(*table_.Find(key), kT0 + 2000);
    EXPECT_EQ(table_.Find(key)->seq, seq);
  }
  EXPECT_EQ(scheduler_.size(), 1u);
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 2000, kPatience));
  clock_.SetMs(kT0 + 2000);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  EXPECT_EQ(Fired(),
            (std::vector<uint64_t>{kLeaseTagBit | seq, kLeaseTagBit | seq}));
}

TEST_F(LeaseTableTest, NoncesAreNeverZero) {
  for (int i = 0; i < 1000; ++i) EXPECT_NE(table_.NewNonce(), 0u);
}

// Nonces come from the OS, not from a PRNG seeded alike: two tables made
// the same way, and one table across more than its 4 KiB buffer, never
// repeat a value.
TEST_F(LeaseTableTest, NoncesAreFreshAcrossTables) {
  LeaseTable other(&scheduler_);
  absl::flat_hash_set<uint64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    EXPECT_TRUE(seen.insert(table_.NewNonce()).second);
    EXPECT_TRUE(seen.insert(other.NewNonce()).second);
  }
}

}  // namespace
}  // namespace delayd::server
