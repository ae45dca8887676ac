// JobService: GetStats (the counts by topic, the due windows and due_soon)
// over an in-memory store and a fake clock (no timer thread).
#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

// GetStats' due windows and due_soon against the due index read whole,
// after random schedules, moves and cancels, as time passes (forward and
// back) and across restarts. Due times cluster around the windows' edges.
TEST_F(JobServiceTest, DueCountsEqualTheDueIndexWhateverTheWritesAndTime) {
  ASSERT_OK(service().Recover());
  std::mt19937_64 rng(7);
  const std::vector<std::string> topics = {"a", "b", "c"};
  constexpr int64_t kEdges[] = {0, 60'000, 3'600'000, 86'400'000};
  const auto random_delay = [&]() -> int64_t {
    const int64_t edge = kEdges[rng() % 4];
    switch (rng() % 3) {
      case 0:
        return edge + static_cast<int64_t>(rng() % 2001) - 1000;
      case 1:
        return edge + static_cast<int64_t>(rng() % 3) - 1;
      default:
        return static_cast<int64_t>(rng() % (2 * 86'400'000));
    }
  };
  const auto check = [&](int step) {
    const int64_t now = clock_.NowMs();
    const int64_t from_s = now / 1000 + 1;
    std::map<std::string, std::array<uint64_t, 3>> want;
    std::array<uint64_t, 60> want_minutes{};
    std::array<uint64_t, 24> want_hours{};
    EXPECT_OK(memory_.ScanDue(
        0, INT64_MAX,
        [&](int64_t due, std::string_view topic, std::string_view) {
          std::array<uint64_t, 3>& w = want[std::string(topic)];
          for (size_t k = 0; k < 3; ++k) {
            if (due > now && due <= now + kEdges[k + 1]) ++w[k];
          }
          const int64_t s = due / 1000 - from_s;
          if (s >= 0 && s < 3600) ++want_minutes[s / 60];
          if (s >= 0 && s < 86'400) ++want_hours[s / 3600];
          return true;
        }));
    v1::GetStatsRequest req;
    req.set_due_soon(true);
    ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse r, service().GetStats(req));
    for (const v1::TopicStats& t : r.topics()) {
      const std::array<uint64_t, 3> w = want[t.topic()];
      EXPECT_EQ(t.due_next_minute(), w[0]) << t.topic() << " step " << step;
      EXPECT_EQ(t.due_next_hour(), w[1]) << t.topic() << " step " << step;
      EXPECT_EQ(t.due_next_day(), w[2]) << t.topic() << " step " << step;
    }
    EXPECT_EQ(Ms(r.due_soon().from()), from_s * 1000);
    EXPECT_THAT(r.due_soon().per_minute(),
                ::testing::ElementsAreArray(want_minutes))
        << "step " << step;
    EXPECT_THAT(r.due_soon().per_hour(),
                ::testing::ElementsAreArray(want_hours))
        << "step " << step;
  };
  int next_id = 0;
  for (int step = 0; step < 600; ++step) {
    const std::string& topic = topics[rng() % topics.size()];
    const std::string id = absl::StrCat("j", rng() % (next_id + 1));
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2:
        MustSchedule(topic, absl::StrCat("j", next_id++),
                     std::max<int64_t>(0, random_delay()));
        break;
      case 3:  // NOT_FOUND when absent or not live: fine
        (void)service().Reschedule(
            RescheduleAtReq(topic, id, clock_.NowMs() + random_delay()));
        break;
      case 4:
        (void)service().Cancel(CancelReq(topic, id));
        break;
      case 5:
        clock_.AdvanceMs(static_cast<int64_t>(rng() % 120'000));
        break;
      case 6:
        clock_.SetMs(clock_.NowMs() - static_cast<int64_t>(rng() % 2'000));
        break;
      default:
        if (rng() % 10 == 0) {
          Restart();
          ASSERT_OK(service().Recover());
        }
        break;
    }
    check(step);
    if (HasFailure()) return;
  }
}

TEST_F(JobServiceTest, GetStatsCountsByTopicAndDueHorizon) {
  MustSchedule("a", "min", 30'000);
  MustSchedule("a", "hour", 59 * 60'000);
  MustSchedule("a", "day", 23 * 3'600'000);
  MustSchedule("a", "later", 48 * 3'600'000);
  MustSchedule("b", "x", 90'000);
  PutRecord("c", "done", v1::JOB_STATE_DONE, kStartMs);  // known from the store

  v1::GetStatsRequest req;
  req.set_topic("a");
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse r, service().GetStats(req));
  ASSERT_EQ(r.topics_size(), 1);
  const v1::TopicStats& a = r.topics(0);
  EXPECT_EQ(a.topic(), "a");
  EXPECT_EQ(a.scheduled(), 4u);
  EXPECT_EQ(a.ready(), 0u);
  EXPECT_EQ(a.in_flight(), 0u);
  EXPECT_EQ(a.dead(), 0u);
  EXPECT_EQ(a.due_next_minute(), 1u);
  EXPECT_EQ(a.due_next_hour(), 2u);
  EXPECT_EQ(a.due_next_day(), 3u);

  ASSERT_OK_AND_ASSIGN(r, service().GetStats({}));
  ASSERT_EQ(r.topics_size(), 3);
  EXPECT_EQ(r.topics(0).topic(), "a");
  EXPECT_EQ(r.topics(1).topic(), "b");
  EXPECT_EQ(r.topics(1).scheduled(), 1u);
  EXPECT_EQ(r.topics(1).due_next_minute(), 0u);
  EXPECT_EQ(r.topics(1).due_next_hour(), 1u);
  EXPECT_EQ(r.topics(2).topic(), "c");
  EXPECT_EQ(r.topics(2).scheduled(), 0u);

  // As time passes, the horizons move.
  clock_.AdvanceMs(60'000);
  req.set_topic("b");
  ASSERT_OK_AND_ASSIGN(r, service().GetStats(req));
  EXPECT_EQ(r.topics(0).due_next_minute(), 1u);
  req.set_topic("no-such-topic");
  ASSERT_OK_AND_ASSIGN(r, service().GetStats(req));
  ASSERT_EQ(r.topics_size(), 1);
  EXPECT_EQ(r.topics(0).scheduled(), 0u);
  req.set_topic("bad topic");
  ExpectInvalid(service().GetStats(req).status(), "topic");
}

}  // namespace
}  // namespace delayd::server::testing
