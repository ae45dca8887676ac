// PlanOccurrences and JitterMs: on time, late within the misfire threshold,
// after downtime under each misfire policy, FIRE_ALL's cap, max_occurrences,
// the end of a schedule, a very long downtime, and the jitter's bounds.
#include "server/recurring/planner.h"

#include <cstdint>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace delayd::server::recurring {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kT = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

Recurrence Every(int64_t interval_ms, std::optional<int64_t> end_ms = {}) {
  v1::Recurrence p;
  p.mutable_every()->mutable_interval()->set_seconds(interval_ms / 1000);
  p.mutable_every()->mutable_interval()->set_nanos(
      static_cast<int32_t>(interval_ms % 1000) * 1'000'000);
  p.mutable_every()->mutable_anchor()->set_seconds(kT / 1000);
  if (end_ms.has_value()) p.mutable_end_at()->set_seconds(*end_ms / 1000);
  absl::StatusOr<Recurrence> r = Recurrence::FromProto("r", p, kT);
  EXPECT_OK(r);
  return *std::move(r);
}

std::vector<int64_t> Range(int64_t from, int64_t to, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t t = from; t <= to; t += step) out.push_back(t);
  return out;
}

TEST(PlannerTest, OnTimeAndLateWithinTheThresholdFireEachOccurrence) {
  const Recurrence r = Every(10'000);
  Plan on_time = PlanOccurrences(r, v1::MISFIRE_POLICY_SKIP, 0, 0, kT, kT + 5);
  EXPECT_THAT(on_time.children, ElementsAre(kT));
  EXPECT_EQ(on_time.misfired, 0u);
  EXPECT_EQ(on_time.next_ms, kT + 10'000);
  // 35 s late: not a misfire, even under SKIP; each occurrence fires.
  Plan late =
      PlanOccurrences(r, v1::MISFIRE_POLICY_SKIP, 0, 0, kT, kT + 35'000);
  EXPECT_EQ(late.children, Range(kT, kT + 30'000, 10'000));
  EXPECT_EQ(late.misfired, 0u);
  EXPECT_EQ(late.next_ms, kT + 40'000);
}

TEST(PlannerTest, AfterDowntimeEachMisfirePolicy) {
  // Every 10 s, handled 300 s late: 24 occurrences older than 60 s
  // (kT .. kT+230 s), 7 within it (kT+240 s .. kT+300 s).
  const Recurrence r = Every(10'000);
  const int64_t now = kT + 300'000;
  const std::vector<int64_t> recent = Range(kT + 240'000, now, 10'000);

  Plan once = PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ONCE, 0, 0, kT, now);
  std::vector<int64_t> want = {kT + 230'000};
  want.insert(want.end(), recent.begin(), recent.end());
  EXPECT_EQ(once.children, want);
  EXPECT_EQ(once.misfired, 23u);
  EXPECT_EQ(once.next_ms, now + 10'000);
  // UNSPECIFIED is FIRE_ONCE.
  EXPECT_EQ(PlanOccurrences(r, v1::MISFIRE_POLICY_UNSPECIFIED, 0, 0, kT, now)
                .children,
            want);

  Plan skip = PlanOccurrences(r, v1::MISFIRE_POLICY_SKIP, 0, 0, kT, now);
  EXPECT_EQ(skip.children, recent);
  EXPECT_EQ(skip.misfired, 24u);

  Plan all = PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ALL, 0, 0, kT, now);
  EXPECT_EQ(all.children, Range(kT, now, 10'000));
  EXPECT_EQ(all.misfired, 0u);
  EXPECT_FALSE(all.misfired_capped);
}

TEST(PlannerTest, FireAllCatchesUpTheLatestThousand) {
  // Every second, 2000 s late: 1940 misfired, 61 within the threshold.
  const Recurrence r = Every(1000);
  const int64_t now = kT + 2'000'000;
  Plan all = PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ALL, 0, 0, kT, now);
  ASSERT_EQ(all.children.size(), kMaxCatchUp + 61);
  EXPECT_EQ(all.children.front(), now - 60'000 - 1000 * 1000);
  EXPECT_EQ(all.children.back(), now);
  EXPECT_EQ(all.misfired, 940u);
}

TEST(PlannerTest, MaxOccurrencesCapsTheChildrenAndEndsTheJob) {
  const Recurrence r = Every(10'000);
  Plan capped =
      PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ALL, 5, 3, kT, kT + 300'000);
  EXPECT_THAT(capped.children, ElementsAre(kT, kT + 10'000));
  EXPECT_EQ(capped.next_ms, std::nullopt);
  Plan last = PlanOccurrences(r, v1::MISFIRE_POLICY_SKIP, 4, 3, kT, kT);
  EXPECT_THAT(last.children, ElementsAre(kT));
  EXPECT_EQ(last.next_ms, std::nullopt);
  Plan more = PlanOccurrences(r, v1::MISFIRE_POLICY_SKIP, 5, 3, kT, kT);
  EXPECT_EQ(more.next_ms, kT + 10'000);
}

TEST(PlannerTest, TheScheduleEndsAtEndAt) {
  const Recurrence r = Every(10'000, kT + 20'000);
  Plan p = PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ONCE, 0, 0, kT + 20'000,
                           kT + 20'000);
  EXPECT_THAT(p.children, ElementsAre(kT + 20'000));
  EXPECT_EQ(p.next_ms, std::nullopt);
}

TEST(PlannerTest, AVeryLongDowntimeIsCountedUpToTheBound) {
  // Every second, 13 days late: more than kMaxCounted misfired.
  const Recurrence r = Every(1000);
  const int64_t now = kT + int64_t{13} * 86'400'000;
  Plan once = PlanOccurrences(r, v1::MISFIRE_POLICY_FIRE_ONCE, 0, 0, kT, now);
  EXPECT_TRUE(once.misfired_capped);
  EXPECT_EQ(once.misfired, kMaxCounted - 1);
  ASSERT_EQ(once.children.size(), 1u + 61u);
  EXPECT_EQ(once.children[1], now - 60'000);
  EXPECT_EQ(once.children.back(), now);
  EXPECT_EQ(once.next_ms, now + 1000);
}

TEST(PlannerTest, JitterIsFixedPerOccurrenceAndWithinItsBound) {
  EXPECT_EQ(JitterMs(42, kT, 0), 0);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 1000; ++i) {
    const int64_t j = JitterMs(42, kT + i * 1000, 5000);
    ASSERT_GE(j, 0);
    ASSERT_LE(j, 5000);
    EXPECT_EQ(j, JitterMs(42, kT + i * 1000, 5000));  // the same every time
    seen.insert(j);
  }
  EXPECT_GT(seen.size(), 500u);  // spread, not one value
  EXPECT_NE(JitterMs(42, kT, 3'600'000), JitterMs(43, kT, 3'600'000));
}

}  // namespace
}  // namespace delayd::server::recurring
