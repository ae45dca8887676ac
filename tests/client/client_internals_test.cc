// Unit tests of the client library's parts that need no server: the
// AckBatcher's batching, the LeaseKeeper's renewals, how handler errors
// become nacks, and the time conversions. The send and extend functions are
// fakes; time is real but every wait is an "eventually" with a deadline.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/ack_batcher.h"
#include "client/handler_status.h"
#include "client/lease_keeper.h"
#include "delayd/client.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace delayd::client {
namespace {

using ::delayd::testing::Eventually;

// Records each batch; refuses tokens starting with "stale".
class FakeAck {
 public:
  absl::StatusOr<std::vector<v1::AckResult>> Send(
      const std::vector<std::string>& tokens) {
    absl::MutexLock lock(&mu_);
    batches_.push_back(tokens);
    if (fail_) return absl::UnavailableError("down");
    std::vector<v1::AckResult> results;
    for (const std::string& t : tokens) {
      v1::AckResult r;
      r.set_ack_token(t);
      if (t.rfind("stale", 0) == 0) r.set_code(9);
      results.push_back(r);
    }
    return results;
  }
  std::vector<std::vector<std::string>> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  void set_fail(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_ = fail;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> batches_ ABSL_GUARDED_BY(mu_);
  bool fail_ ABSL_GUARDED_BY(mu_) = false;
};

AckBatcher::SendFn SendTo(FakeAck* fake) {
  return [fake](const std::vector<std::string>& t) { return fake->Send(t); };
}

TEST(AckBatcherTest, AFullBatchGoesAtOnceAndStopFlushesTheRest) {
  FakeAck fake;
  AckBatcher batcher(SendTo(&fake), nullptr, absl::Hours(1), 3);
  for (int i = 0; i < 7; ++i) batcher.Add(absl::StrCat("t", i));
  ASSERT_TRUE(Eventually([&] { return fake.batches().size() >= 2; }));
  batcher.Stop();
  const auto batches = fake.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<std::string>{"t0", "t1", "t2"}));
  EXPECT_EQ(batches[1], (std::vector<std::string>{"t3", "t4", "t5"}));
  EXPECT_EQ(batches[2], (std::vector<std::string>{"t6"}));
  EXPECT_EQ(batcher.stats().rpcs, 3u);
  EXPECT_EQ(batcher.stats().acked, 7u);
}

TEST(AckBatcherTest, APartialBatchGoesAfterTheInterval) {
  FakeAck fake;
  AckBatcher batcher(SendTo(&fake), nullptr, absl::Milliseconds(20), 500);
  batcher.Add("a");
  batcher.Add("b");
  ASSERT_TRUE(Eventually([&] { return fake.batches().size() == 1; }));
  EXPECT_EQ(fake.batches()[0], (std::vector<std::string>{"a", "b"}));
}

TEST(AckBatcherTest, RefusedTokensAndFailedRpcsAreCountedAndReported) {
  FakeAck fake;
  std::vector<absl::Status> errors;
  AckBatcher batcher(
      SendTo(&fake), [&](const absl::Status& s) { errors.push_back(s); },
      absl::Hours(1), 2);
  batcher.Add("ok");
  batcher.Add("stale-1");
  ASSERT_TRUE(Eventually([&] { return batcher.stats().rpcs == 1; }));
  fake.set_fail(true);
  batcher.Add("x");
  batcher.Stop();
  const AckBatcher::Stats stats = batcher.stats();
  EXPECT_EQ(stats.rpcs, 2u);
  EXPECT_EQ(stats.acked, 1u);
  EXPECT_EQ(stats.failures, 2u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(errors[1].code(), absl::StatusCode::kUnavailable);
}

TEST(AckBatcherTest, AddAfterStopSendsAtOnce) {
  FakeAck fake;
  AckBatcher batcher(SendTo(&fake), nullptr, absl::Hours(1), 100);
  batcher.Stop();
  batcher.Add("late");
  ASSERT_EQ(fake.batches().size(), 1u);
}

TEST(LeaseKeeperTest, RenewsUntilUntrackedAndDropsAStaleLease) {
  absl::Mutex mu;
  std::vector<std::string> calls;
  LeaseKeeper keeper(
      [&](const std::string& token, absl::Duration extend_by,
          absl::Duration) -> absl::StatusOr<absl::Time> {
        absl::MutexLock lock(&mu);
        calls.push_back(token);
        if (token == "stale") return absl::FailedPreconditionError("stale");
        return absl::Now() + extend_by;
      },
      nullptr);
  const absl::Time start = absl::Now();
  keeper.Track("live", start, absl::Milliseconds(150));
  keeper.Track("stale", start, absl::Milliseconds(150));
  ASSERT_TRUE(Eventually([&] { return keeper.stats().extensions >= 3; }));
  keeper.Untrack("live");
  const LeaseKeeper::Stats stats = keeper.stats();
  EXPECT_EQ(stats.failures, 1u);  // "stale" was tried once, then dropped
  // Each renewal came before the lease it renewed ran out: 3 renewals of a
  // 150 ms lease kept it alive for at least ~300 ms.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  absl::SleepFor(absl::Milliseconds(300));
  absl::MutexLock lock(&mu);
  const size_t live_calls =
      std::count(calls.begin(), calls.end(), std::string("live"));
  EXPECT_LE(live_calls, stats.extensions + 1);  // none after Untrack
  EXPECT_EQ(std::count(calls.begin(), calls.end(), std::string("stale")), 1);
}

TEST(HandlerStatusTest, RetryAfterAndDeadLetterBecomeTheNack) {
  NackPlan plain = NackPlanOf(absl::InternalError("x"));
  EXPECT_FALSE(plain.retry_after.has_value());
  EXPECT_FALSE(plain.dead_letter);
  NackPlan later =
      NackPlanOf(RetryAfter(absl::InternalError("x"), absl::Seconds(3)));
  EXPECT_EQ(later.retry_after, absl::Seconds(3));
  EXPECT_FALSE(later.dead_letter);
  NackPlan dead = NackPlanOf(DeadLetter(absl::InternalError("x")));
  EXPECT_TRUE(dead.dead_letter);
}

TEST(TimeTest, ConversionsRoundTrip) {
  for (absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(1500),
                           -absl::Milliseconds(1500), absl::Hours(100)}) {
    const google::protobuf::Duration p = ToProto(d);
    EXPECT_TRUE(p.seconds() == 0 || p.nanos() == 0 ||
                (p.seconds() < 0) == (p.nanos() < 0));
    EXPECT_EQ(FromProto(p), d);
  }
  const absl::Time t = absl::FromUnixMillis(1'700'000'000'123);
  EXPECT_EQ(ToProto(t).seconds(), 1'700'000'000);
  EXPECT_EQ(ToProto(t).nanos(), 123'000'000);
  EXPECT_EQ(FromProto(ToProto(t)), t);
  const absl::Time before_epoch = absl::FromUnixMillis(-1500);
  EXPECT_EQ(ToProto(before_epoch).seconds(), -2);
  EXPECT_EQ(ToProto(before_epoch).nanos(), 500'000'000);
}

}  // namespace
}  // namespace delayd::client
