// Drives a TimingWheel and a std::multimap reference model with the same
// random operations — inserts (past, near, far, up to 100 years), batches,
// cancels, reschedules, stale handles, opening ahead (whole or in steps,
// often left halfway), crowds taken ahead
// (odd tags only), and advances by small steps, big jumps and backward steps
// — and checks that exactly the due, non-canceled entries fire, none early,
// each once, in due order, and that a take ahead returns exactly the
// accepted entries of its millisecond, after now.
//
// DELAYD_RANDOM_OPS (default 5000000) and DELAYD_RANDOM_SEED override the run.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "server/timer/timing_wheel.h"

namespace delayd::timer {
namespace {

constexpr int64_t kSec = 1000;
constexpr int64_t kHour = 3600 * kSec;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kYear = 365 * kDay;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::strtoll(v, nullptr, 10);
}

bool ByDueThenTag(const TimerEntry& a, const TimerEntry& b) {
  return a.due_ms != b.due_ms ? a.due_ms < b.due_ms : a.tag < b.tag;
}

class Model {
 public:
  struct Live {
    std::multimap<int64_t, uint64_t>::iterator it;
    TimerHandle handle;
    size_t index;  // in live_tags_
  };

  void Add(uint64_t tag, int64_t due, TimerHandle h) {
    live_[tag] = Live{by_due_.emplace(due, tag), h, live_tags_.size()};
    live_tags_.push_back(tag);
  }
  void Remove(uint64_t tag) {
    Live& l = live_.at(tag);
    by_due_.erase(l.it);
    const uint64_t last = live_tags_.back();
    live_tags_[l.index] = last;
    live_.at(last).index = l.index;
    live_tags_.pop_back();
    dead_.push_back(l.handle);
    live_.erase(tag);
  }
  void Move(uint64_t tag, int64_t due) {
    Live& l = live_.at(tag);
    by_due_.erase(l.it);
    l.it = by_due_.emplace(due, tag);
  }
  // Removes and returns the entries due by `now`.
  std::vector<TimerEntry> TakeDue(int64_t now) {
    std::vector<TimerEntry> due;
    while (!by_due_.empty() && by_due_.begin()->first <= now) {
      due.push_back({by_due_.begin()->first, by_due_.begin()->second});
      Remove(by_due_.begin()->second);
    }
    return due;
  }

  std::unordered_map<uint64_t, Live> live_;
  std::vector<uint64_t> live_tags_;
  std::multimap<int64_t, uint64_t> by_due_;
  std::vector<TimerHandle> dead_;
};

TEST(TimingWheelRandomTest, MatchesReferenceModel) {
  const int64_t ops = EnvOr("DELAYD_RANDOM_OPS", 5000000);
  const auto seed =
      static_cast<uint64_t>(EnvOr("DELAYD_RANDOM_SEED", 20261122));
  SCOPED_TRACE("DELAYD_RANDOM_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };

  int64_t now = 1795316400250;
  TimingWheel wheel(now);
  wheel.SetCrowdSize(3);
  Model model;
  uint64_t next_tag = 1;
  int64_t fired_total = 0, big_jumps = 0, backward_steps = 0, taken = 0;

  auto random_due = [&]() -> int64_t {
    const int64_t p = uniform(0, 99);
    if (p < 8) return now - uniform(0, 2 * kHour);   // already due
    if (p < 45) return now + uniform(0, 2 * kSec);   // this second or next
    if (p < 80) return now + uniform(0, 2 * kHour);  // within a revolution
    if (p < 97) return now + uniform(0, 3 * kDay);   // several revolutions
    return now + uniform(0, 100 * kYear);            // far future
  };

  for (int64_t op = 0; op < ops; ++op) {
    const int64_t p = uniform(0, 999);
    const bool crowded = model.live_tags_.size() > 20000;
    if (p < 380 && !crowded) {
      const uint64_t tag = next_tag++;
      const int64_t due = random_due();
      model.Add(tag, due, wheel.Insert(due, tag));
    } else if (p < 390 && !crowded) {
      std::vector<TimerEntry> batch(static_cast<size_t>(uniform(1, 64)));
      // Half the batches share one due time: crowds, some in the open
      // seconds.
      std::optional<int64_t> shared;
      if (uniform(0, 1) == 0) shared = random_due();
      for (TimerEntry& e : batch) {
        e = {shared ? *shared : random_due(), next_tag++};
      }
      const std::vector<TimerHandle> handles = wheel.InsertBatch(batch);
      ASSERT_EQ(handles.size(), batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        model.Add(batch[i].tag, batch[i].due_ms, handles[i]);
      }
    } else if (p < 560 && !model.live_tags_.empty()) {
      const uint64_t tag = model.live_tags_[static_cast<size_t>(
          uniform(0, static_cast<int64_t>(model.live_tags_.size()) - 1))];
      ASSERT_TRUE(wheel.Cancel(model.live_.at(tag).handle));
      model.Remove(tag);
    } else if (p < 700 && !model.live_tags_.empty()) {
      const uint64_t tag = model.live_tags_[static_cast<size_t>(
          uniform(0, static_cast<int64_t>(model.live_tags_.size()) - 1))];
      const int64_t due = random_due();
      ASSERT_TRUE(wheel.Reschedule(model.live_.at(tag).handle, due));
      model.Move(tag, due);
    } else if (p >= 730 && p < 745 && wheel.NextCrowdMs().has_value()) {
      const int64_t crowd = *wheel.NextCrowdMs();
      ASSERT_GT(crowd, now);
      std::vector<TimerEntry> got =
          wheel.TakeAhead(crowd, [](uint64_t tag) { return tag % 2 == 1; });
      std::vector<TimerEntry> expected;
      for (auto [it, end] = model.by_due_.equal_range(crowd); it != end; ++it) {
        if (it->second % 2 == 1) expected.push_back({it->first, it->second});
      }
      for (const TimerEntry& e : expected) model.Remove(e.tag);
      std::sort(got.begin(), got.end(), ByDueThenTag);
      std::sort(expected.begin(), expected.end(), ByDueThenTag);
      ASSERT_EQ(got, expected) << "at op " << op << ", now " << now;
      ASSERT_NE(wheel.NextCrowdMs(), crowd);
      taken += static_cast<int64_t>(got.size());
    } else if (p < 730 && !model.dead_.empty()) {
      const TimerHandle h = model.dead_[static_cast<size_t>(
          uniform(0, static_cast<int64_t>(model.dead_.size()) - 1))];
      ASSERT_FALSE(uniform(0, 1) == 0 ? wheel.Cancel(h)
                                      : wheel.Reschedule(h, now + 5));
    } else {
      const int64_t q = uniform(0, 999);
      int64_t step;
      if (q < 600) {
        step = uniform(0, 3);
      } else if (q < 850) {
        step = uniform(0, 1500);
      } else if (q < 930) {
        step = uniform(0, 2 * kHour);
      } else if (q < 950) {
        step = uniform(kHour, 3 * kDay);
        ++big_jumps;
      } else if (q < 952) {
        step = uniform(kYear, 30 * kYear);
        ++big_jumps;
      } else {
        step = -uniform(1, q < 990 ? 2 * kSec : 2 * kHour);
        ++backward_steps;
      }
      now += step;
      // Opening ahead, whole or in steps (often left halfway, so that the
      // ops that follow meet a second being opened).
      const int64_t o = uniform(0, 5);
      if (o == 0) {
        wheel.OpenNextSecond();
      } else if (o <= 2) {
        wheel.OpenNextSecond(static_cast<size_t>(uniform(0, 8)));
      }
      std::vector<TimerEntry> fired = wheel.Advance(now);
      for (size_t i = 0; i < fired.size(); ++i) {
        ASSERT_LE(fired[i].due_ms, now) << "fired early";
        if (i > 0) {
          ASSERT_LE(fired[i - 1].due_ms, fired[i].due_ms);
        }
      }
      std::vector<TimerEntry> expected = model.TakeDue(now);
      std::sort(fired.begin(), fired.end(), ByDueThenTag);
      std::sort(expected.begin(), expected.end(), ByDueThenTag);
      ASSERT_EQ(fired, expected) << "at op " << op << ", now " << now;
      fired_total += static_cast<int64_t>(fired.size());
    }
    if (op % 1024 == 0) {
      ASSERT_EQ(wheel.size(), model.by_due_.size());
      const std::optional<int64_t> next = wheel.NextDueMs();
      ASSERT_EQ(next.has_value(), !model.by_due_.empty());
      if (next.has_value()) {
        ASSERT_LE(*next, model.by_due_.begin()->first);
        ASSERT_LE(*wheel.NextWakeMs(), *next);
      }
    }
    if (model.dead_.size() > 100000)
      model.dead_.erase(model.dead_.begin(), model.dead_.begin() + 50000);
  }
  EXPECT_GT(fired_total, ops / 10);
  EXPECT_GT(big_jumps, 0);
  EXPECT_GT(backward_steps, 0);
  EXPECT_GT(taken, 0);
  std::printf(
      "ops %lld fired %lld big jumps %lld backward steps %lld taken ahead "
      "%lld\n",
      static_cast<long long>(ops), static_cast<long long>(fired_total),
      static_cast<long long>(big_jumps), static_cast<long long>(backward_steps),
      static_cast<long long>(taken));
}

}  // namespace
}  // namespace delayd::timer
