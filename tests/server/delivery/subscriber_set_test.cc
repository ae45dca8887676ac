// SubscriberSet: credit handed out round-robin over the subscribers of a
// topic that have some free, returned by GiveBack and DetachLease.
#include "server/delivery/subscriber_set.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

class NullSink : public DeliverySink {
 public:
  void Send(std::vector<v1::Delivery>) override {}
  size_t Unwritten() const override { return unwritten; }
  size_t unwritten = 0;
  void Close(const absl::Status&) override {}
};

std::shared_ptr<DeliverySink> Sink() { return std::make_shared<NullSink>(); }

TEST(SubscriberSetTest, ReservesRoundRobinOverTheTopicsSubscribers) {
  SubscriberSet set;
  const uint64_t a = set.Add("t", "a", 2, Sink());
  const uint64_t b = set.Add("t", "b", 2, Sink());
  const uint64_t c = set.Add("t", "c", 2, Sink());
  set.Add("other", "d", 2, Sink());
  EXPECT_THAT(set.Reserve("t", 7), ElementsAre(a, b, c, a, b, c));
  EXPECT_THAT(set.Reserve("t", 1), IsEmpty());  // all out of credit
  EXPECT_THAT(set.Reserve("nobody", 1), IsEmpty());
}

TEST(SubscriberSetTest, ASubscriberOutOfCreditIsSkipped) {
  SubscriberSet set;
  const uint64_t slow = set.Add("t", "slow", 1, Sink());
  const uint64_t fast = set.Add("t", "fast", 3, Sink());
  const std::vector<uint64_t> slots = set.Reserve("t", 10);
  EXPECT_THAT(slots, ElementsAre(slow, fast, fast, fast));
  set.GiveBack("t", absl::MakeConstSpan(slots).subspan(3));
  EXPECT_THAT(set.Reserve("t", 10), ElementsAre(fast));
}

// per_turn > 1: each subscriber in turn takes up to that many of its free
// credits, kept together, so a round goes out in fewer sends; the turns
// still go round.
TEST(SubscriberSetTest, ATurnTakesUpToPerTurnCreditsOfOneSubscriber) {
  SubscriberSet set;
  const uint64_t a = set.Add("t", "a", 4, Sink());
  const uint64_t b = set.Add("t", "b", 2, Sink());
  const uint64_t c = set.Add("t", "c", 3, Sink());
  EXPECT_THAT(set.Reserve("t", 4, 3), ElementsAre(a, a, a, b));
  // b's turn was cut short by the round: the next goes on after it.
  EXPECT_THAT(set.Reserve("t", 2, 3), ElementsAre(c, c));
  EXPECT_THAT(set.Reserve("t", 9, 3), ElementsAre(a, b, c));
  EXPECT_THAT(set.Reserve("t", 9, 3), IsEmpty());  // all out of credit
  for (int i = 0; i < 4; ++i) set.Find(a)->in_flight--;
  set.Find(c)->in_flight--;
  const std::vector<uint64_t> slots = set.Reserve("t", 9, 3);
  EXPECT_THAT(slots, ElementsAre(a, a, a, c, a));
  // Two of a's used: what is given back starts the next round at a.
  set.GiveBack("t", absl::MakeConstSpan(slots).subspan(2));
  EXPECT_THAT(set.Reserve("t", 9, 3), ElementsAre(a, a, c));
  for (int i = 0; i < 4; ++i) set.Find(a)->in_flight--;
  for (int i = 0; i < 2; ++i) set.Find(b)->in_flight--;
  EXPECT_THAT(set.Reserve("t", 2, 0), ElementsAre(a, b));  // 0 counts as 1
}

// A client that stopped reading: its leases may have ended (credit back),
// but what waits unwritten in its stream counts against its credit too.
TEST(SubscriberSetTest, UnwrittenDeliveriesUseCreditToo) {
  SubscriberSet set;
  auto stuck_sink = std::make_shared<NullSink>();
  const uint64_t stuck = set.Add("t", "stuck", 3, stuck_sink);
  const uint64_t ok = set.Add("t", "ok", 3, Sink());
  stuck_sink->unwritten = 3;
  EXPECT_THAT(set.Reserve("t", 10), ElementsAre(ok, ok, ok));
  for (int i = 0; i < 3; ++i) set.Find(ok)->in_flight--;
  stuck_sink->unwritten = 2;  // one written: room for one
  EXPECT_THAT(set.Reserve("t", 10), ElementsAre(stuck, ok, ok, ok));
}

TEST(SubscriberSetTest, GiveBackGoesOnFromTheFirstUnusedCredit) {
  SubscriberSet set;
  const uint64_t a = set.Add("t", "a", 50, Sink());
  const uint64_t b = set.Add("t", "b", 50, Sink());
  const uint64_t c = set.Add("t", "c", 50, Sink());
  // A chunk reserved for one job: the next turn is b's, then c's, then a's.
  for (uint64_t expected : {a, b, c, a, b}) {
    const std::vector<uint64_t> slots = set.Reserve("t", 256);
    ASSERT_EQ(slots.size(), 150u);
    EXPECT_EQ(slots[0], expected);
    set.GiveBack("t", absl::MakeConstSpan(slots).subspan(1));
    set.Find(slots[0])->in_flight--;  // its job was acked
  }
  // Two of three used: the third goes first next time.
  std::vector<uint64_t> slots = set.Reserve("t", 3);
  ASSERT_THAT(slots, ElementsAre(c, a, b));
  set.GiveBack("t", absl::MakeConstSpan(slots).subspan(2));
  EXPECT_EQ(set.Reserve("t", 1)[0], b);
}

TEST(SubscriberSetTest, ALeaseHoldsItsCreditUntilDetached) {
  SubscriberSet set;
  const uint64_t a = set.Add("t", "a", 1, Sink());
  ASSERT_THAT(set.Reserve("t", 1), ElementsAre(a));
  const JobKey key{"t", "job-1"};
  set.AttachLease(a, key);
  EXPECT_THAT(set.Find(a)->leased, ElementsAre(key));
  EXPECT_THAT(set.Reserve("t", 1), IsEmpty());
  EXPECT_TRUE(set.DetachLease(a, key));
  EXPECT_THAT(set.Find(a)->leased, IsEmpty());
  EXPECT_THAT(set.Reserve("t", 1), ElementsAre(a));
}

TEST(SubscriberSetTest, RemoveHandsBackTheLeasesAndKeepsTheOrderValid) {
  SubscriberSet set;
  const uint64_t a = set.Add("t", "a", 5, Sink());
  const uint64_t b = set.Add("t", "b", 5, Sink());
  const uint64_t c = set.Add("t", "c", 5, Sink());
  ASSERT_THAT(set.Reserve("t", 3), ElementsAre(a, b, c));  // cursor at a
  set.AttachLease(c, {"t", "x"});
  set.AttachLease(c, {"t", "y"});
  std::optional<SubscriberSet::Subscriber> removed = set.Remove(c);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->topic, "t");
  EXPECT_THAT(removed->leased,
              UnorderedElementsAre(JobKey{"t", "x"}, JobKey{"t", "y"}));
  EXPECT_EQ(set.Find(c), nullptr);
  EXPECT_FALSE(set.DetachLease(c, {"t", "x"}));  // its credit went with it
  EXPECT_FALSE(set.Remove(c).has_value());
  EXPECT_THAT(set.Reserve("t", 4), ElementsAre(a, b, a, b));
  set.Remove(a);
  set.Remove(b);
  EXPECT_THAT(set.Reserve("t", 1), IsEmpty());
}

TEST(SubscriberSetTest, CloseRefusesCreditAndReturnsEverySink) {
  SubscriberSet set;
  set.Add("t", "a", 5, Sink());
  set.Add("u", "b", 5, Sink());
  EXPECT_FALSE(set.closed());
  EXPECT_EQ(set.Close().size(), 2u);
  EXPECT_TRUE(set.closed());
  EXPECT_THAT(set.Reserve("t", 1), IsEmpty());
}

}  // namespace
}  // namespace delayd::server
