// End to end: recurring jobs against the real binary (issue 14) — an
// interval job's occurrences delivered on time, a cron job across kill -9,
// the three misfire policies after the server was down for more than a
// minute, overlap SKIP, pause / resume / cancel, and a dead occurrence that
// does not stop the next. Which occurrences must fire is computed from what
// the server reports (nominal times, the parent's counts, a child's
// created_at: the server's clock when it made the child), never from the
// test's own guesses of time. Every delivery is checked never early by the
// fixture.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/delivery_fixture.h"

namespace delayd::testing {
namespace {

// The lateness bound of the one-shot e2e tests (delivery_lateness_test's
// median); here every single delivery must meet it.
constexpr absl::Duration kLatenessBound = absl::Seconds(1);
// The proto's MisfirePolicy: an occurrence is misfired when it is more than
// this late when its job is handled.
constexpr int64_t kMisfireThresholdMs = 60'000;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

int64_t Ms(const google::protobuf::Timestamp& t) {
  return absl::ToUnixMillis(FromProto(t));
}

int64_t NominalMs(const Received& r) {
  return Ms(r.delivery.job().occurrence_of().nominal_time());
}

int64_t CreatedMs(const Received& r) {
  return Ms(r.delivery.job().created_at());
}

// A recurring job every `interval`, from now (its anchor: the first
// occurrence is at the time of the call).
v1::JobSpec Every(const std::string& topic, const std::string& id,
                  absl::Duration interval,
                  v1::OverlapPolicy overlap = v1::OVERLAP_POLICY_UNSPECIFIED,
                  v1::MisfirePolicy misfire = v1::MISFIRE_POLICY_UNSPECIFIED) {
  v1::JobSpec spec = Spec(topic, id, absl::InfiniteDuration(), "tick");
  v1::Recurrence& r = *spec.mutable_recurrence();
  *r.mutable_every()->mutable_interval() = ToProto(interval);
  r.set_overlap(overlap);
  r.set_misfire(misfire);
  return spec;
}

// The deliveries of the occurrences of parent `id`, in the order received.
std::vector<Received> OccurrencesOf(const std::vector<Received>& all,
                                    const std::string& id) {
  std::vector<Received> out;
  for (const Received& r : all) {
    if (r.delivery.job().occurrence_of().id() == id) out.push_back(r);
  }
  return out;
}

// The distinct nominal times among `deliveries`, ascending.
std::vector<int64_t> Nominals(const std::vector<Received>& deliveries) {
  std::set<int64_t> set;
  for (const Received& r : deliveries) set.insert(NominalMs(r));
  return {set.begin(), set.end()};
}

// Whether `ms` ascends in steps of exactly `step_ms`.
bool EveryStep(const std::vector<int64_t>& ms, int64_t step_ms) {
  for (size_t i = 1; i < ms.size(); ++i) {
    if (ms[i] - ms[i - 1] != step_ms) return false;
  }
  return true;
}

class RecurringJobsTest : public DeliveryTest {
 protected:
  // A subscriber of `topic`, once the server counts it (so that the first
  // occurrence does not wait for it).
  TestSubscriber& SubscribeNow(const std::string& topic, bool auto_ack) {
    TestSubscriber& sub = Subscribe(topic, 1000, auto_ack);
    EXPECT_TRUE(
        Eventually([&] { return client_->StatsOf(topic).subscribers() == 1; }));
    return sub;
  }

  v1::Job Parent(const std::string& topic, const std::string& id) {
    Reply<v1::Job> job = client_->GetJob(topic, id);
    EXPECT_RPC_OK(job);
    return job.response;
  }

  // Restart(SIGKILL), with the server down for `downtime` in between.
  // Returns a time by which the old process had died.
  absl::Time KillFor(absl::Duration downtime) {
    for (const auto& sub : subscribers_) sub->Cancel();
    server_->KeepDir();
    const std::string dir = server_->dir();
    server_->Signal(SIGKILL);
    EXPECT_OK(server_->Wait());
    const absl::Time dead = absl::Now();
    server_.reset();
    absl::SleepFor(downtime);
    StartServer(dir);
    if (server_ == nullptr) return dead;  // StartServer failed the test
    delivery_ = std::make_unique<DeliveryClient>(server_->NewChannel());
    return dead;
  }
};

// Ten occurrences of an `every 1s` job, acked at once: each one a
// child `t@<nominal ms>` saying where it came from, 1 s after the one before,
// delivered within the one-shot lateness bound. ALLOW keeps a slow ack on a
// loaded machine from skipping one (overlap has its own test below).
TEST_F(RecurringJobsTest, AnEverySecondJobIsDeliveredTenTimesEachOnTime) {
  TestSubscriber& sub = SubscribeNow("tick", /*auto_ack=*/true);
  MustSchedule(Every("tick", "t", absl::Seconds(1), v1::OVERLAP_POLICY_ALLOW));
  ASSERT_TRUE(sub.WaitFor(10, absl::Seconds(60)));
  std::vector<Received> got = sub.received();
  got.resize(10);
  std::sort(got.begin(), got.end(), [](const Received& a, const Received& b) {
    return NominalMs(a) < NominalMs(b);
  });
  for (size_t i = 0; i < got.size(); ++i) {
    const Received& r = got[i];
    const v1::Job& child = r.delivery.job();
    SCOPED_TRACE(child.id());
    ASSERT_TRUE(child.has_occurrence_of());
    EXPECT_EQ(child.occurrence_of().id(), "t");
    const int64_t nominal = NominalMs(r);
    EXPECT_EQ(child.id(), absl::StrCat("t@", nominal));
    EXPECT_EQ(Ms(child.fire_at()), nominal);  // no jitter
    EXPECT_EQ(child.payload(), "tick");
    EXPECT_FALSE(child.has_recurring());
    EXPECT_EQ(r.delivery.attempt(), 1u);
    EXPECT_GE(r.at, absl::FromUnixMillis(nominal));
    EXPECT_LT(r.at - absl::FromUnixMillis(nominal), kLatenessBound);
    if (i > 0) {
      EXPECT_EQ(nominal - NominalMs(got[i - 1]), 1000);
    }
  }
  const v1::Job parent = Parent("tick", "t");
  EXPECT_EQ(parent.state(), v1::JOB_STATE_SCHEDULED);  // never delivered
  EXPECT_EQ(Ms(parent.recurring().recurrence().every().anchor()),
            NominalMs(got[0]));
  EXPECT_GE(parent.recurring().occurrences_fired(), 10u);
  EXPECT_EQ(parent.recurring().occurrences_skipped(), 0u);
}

// A cron job every second keeps firing across kill -9. A nominal
// time delivered twice must be the same child (same created_at) delivered
// again with a higher attempt: an unacked one (its ack may not have reached
// the server before the kill) redelivered, never an occurrence made twice.
TEST_F(RecurringJobsTest, ACronJobKeepsFiringAcrossKillNine) {
  TestSubscriber& before = SubscribeNow("cron", /*auto_ack=*/true);
  v1::JobSpec spec = Spec("cron", "c", absl::InfiniteDuration(), "tick");
  spec.mutable_recurrence()->mutable_cron()->set_expression("* * * * * ?");
  MustSchedule(spec);
  ASSERT_TRUE(before.WaitFor(3, absl::Seconds(30)));
  ASSERT_NO_FATAL_FAILURE(Restart(SIGKILL));
  std::vector<Received> all = before.received();
  int64_t last_before = 0;
  for (const Received& r : all)
    last_before = std::max(last_before, NominalMs(r));

  TestSubscriber& after = SubscribeNow("cron", /*auto_ack=*/true);
  auto later = [&] {
    size_t n = 0;
    for (const Received& r : after.received()) {
      if (NominalMs(r) > last_before) ++n;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return later() >= 3; }, absl::Seconds(30)))
      << later() << " occurrences after the restart";
  for (const Received& r : after.received()) all.push_back(r);

  std::map<std::string, std::vector<Received>> by_id;
  for (const Received& r : all) {
    EXPECT_EQ(NominalMs(r) % 1000, 0) << r.delivery.job().id();
    EXPECT_EQ(r.delivery.job().id(), absl::StrCat("c@", NominalMs(r)));
    by_id[r.delivery.job().id()].push_back(r);
  }
  for (const auto& [id, deliveries] : by_id) {
    for (size_t i = 1; i < deliveries.size(); ++i) {
      EXPECT_EQ(CreatedMs(deliveries[i]), CreatedMs(deliveries[0]))
          << id << " was made again, not redelivered";
      EXPECT_GT(deliveries[i].delivery.attempt(),
                deliveries[i - 1].delivery.attempt())
          << id << " delivered twice with the same attempt";
    }
  }
  const v1::Job parent = Parent("cron", "c");
  EXPECT_EQ(parent.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_GE(parent.recurring().occurrences_fired(), by_id.size());
  EXPECT_GT(Ms(parent.recurring().last_occurrence()), last_before);
}

// The misfire policies, all three in one downtime. The server has
// no fake clock and makes no occurrence before a job's start (now, when it
// was scheduled), so occurrences more than 60 s late need the server down
// for more than 60 s: three jobs every 2 s, killed together, down for 66 s.
//
// What must happen is computed from what the server reports. The children
// it made before the kill end at nominal N0 - 2 s; after the restart it
// handles each parent once for all its missed occurrences N0, N0 + 2 s, ...
// up to that handling's clock, which is every catch-up child's created_at.
// Those older than created_at - 60 s are misfired (>= 2 of them: the
// downtime leaves at least 6 s past the threshold), the rest fire late:
//   FIRE_ONCE  the latest misfired one and the late ones;
//   SKIP       the late ones;
//   FIRE_ALL   all of them.
// Then on with the schedule. Overlap ALLOW keeps overlap out of the counts.
TEST_F(RecurringJobsTest, MisfirePoliciesAfterMoreThanAMinuteDown) {
  struct Policy {
    std::string id;
    v1::MisfirePolicy misfire;
  };
  const std::vector<Policy> policies = {
      {"fire-once", v1::MISFIRE_POLICY_FIRE_ONCE},
      {"skip", v1::MISFIRE_POLICY_SKIP},
      {"fire-all", v1::MISFIRE_POLICY_FIRE_ALL}};
  constexpr int64_t kIntervalMs = 2000;
  const std::string topic = "misfire";

  TestSubscriber& before = SubscribeNow(topic, /*auto_ack=*/true);
  for (const Policy& p : policies) {
    MustSchedule(Every(topic, p.id, absl::Milliseconds(kIntervalMs),
                       v1::OVERLAP_POLICY_ALLOW, p.misfire));
  }
  ASSERT_TRUE(Eventually(
      [&] {
        for (const Policy& p : policies) {
          if (OccurrencesOf(before.received(), p.id).size() < 2) return false;
        }
        return true;
      },
      absl::Seconds(30)));
  const int64_t dead_ms = absl::ToUnixMillis(KillFor(absl::Seconds(66)));
  ASSERT_NE(server_, nullptr);

  // Waits until each parent fired twice after its catch-up, then pauses it
  // so that its counts hold still, then until all it made was delivered.
  TestSubscriber& after = SubscribeNow(topic, /*auto_ack=*/true);
  auto post_catch_up = [&](const std::string& id) {
    std::vector<Received> post;
    for (const Received& r : OccurrencesOf(after.received(), id)) {
      if (CreatedMs(r) > dead_ms) post.push_back(r);
    }
    int64_t catch_up_ms = kNever;
    for (const Received& r : post)
      catch_up_ms = std::min(catch_up_ms, CreatedMs(r));
    size_t n = 0;
    for (const Received& r : post) {
      if (CreatedMs(r) > catch_up_ms) ++n;
    }
    return n;
  };
  std::map<std::string, v1::Job> paused;
  for (const Policy& p : policies) {
    ASSERT_TRUE(
        Eventually([&] { return post_catch_up(p.id) >= 2; }, absl::Seconds(60)))
        << p.id;
    Reply<v1::PauseJobResponse> pause = client_->PauseJob(topic, p.id);
    ASSERT_RPC_OK(pause);
    paused[p.id] = pause.response.job();
  }
  auto delivered = [&](const std::string& id) {
    std::vector<Received> all = OccurrencesOf(before.received(), id);
    for (const Received& r : OccurrencesOf(after.received(), id)) {
      all.push_back(r);
    }
    return all;
  };
  for (const Policy& p : policies) {
    EXPECT_TRUE(Eventually([&] {
      return Nominals(delivered(p.id)).size() ==
             paused[p.id].recurring().occurrences_fired();
    })) << p.id;
  }

  for (const Policy& p : policies) {
    SCOPED_TRACE(p.id);
    const std::vector<Received> all = delivered(p.id);
    std::map<int64_t, int64_t> created;  // nominal -> created_at
    for (const Received& r : all) created[NominalMs(r)] = CreatedMs(r);
    std::vector<int64_t> pre;
    int64_t catch_up_ms = kNever;
    for (const auto& [nominal, at] : created) {
      if (at <= dead_ms) {
        pre.push_back(nominal);
      } else {
        catch_up_ms = std::min(catch_up_ms, at);
      }
    }
    ASSERT_GE(pre.size(), 2u);
    ASSERT_NE(catch_up_ms, kNever);
    EXPECT_TRUE(EveryStep(pre, kIntervalMs));
    // The missed occurrences, and which of them were misfired.
    std::vector<int64_t> misfired, late;
    for (int64_t t = pre.back() + kIntervalMs; t <= catch_up_ms;
         t += kIntervalMs) {
      (t < catch_up_ms - kMisfireThresholdMs ? misfired : late).push_back(t);
    }
    ASSERT_GE(misfired.size(), 2u) << "down too briefly to tell the policies";
    ASSERT_FALSE(late.empty());
    std::vector<int64_t> want;
    uint64_t want_skipped = 0;
    switch (p.misfire) {
      case v1::MISFIRE_POLICY_FIRE_ONCE:
        want.push_back(misfired.back());
        want_skipped = misfired.size() - 1;
        break;
      case v1::MISFIRE_POLICY_SKIP:
        want_skipped = misfired.size();
        break;
      default:  // FIRE_ALL
        want = misfired;
        break;
    }
    want.insert(want.end(), late.begin(), late.end());
    std::vector<int64_t> caught_up, on;
    for (const auto& [nominal, at] : created) {
      if (at == catch_up_ms) caught_up.push_back(nominal);
      if (at > catch_up_ms) on.push_back(nominal);
    }
    EXPECT_EQ(caught_up, want)
        << misfired.size() << " misfired, " << late.size()
        << " late, handled at " << catch_up_ms;
    // Then on with the schedule, from the first occurrence after the
    // catch-up.
    ASSERT_GE(on.size(), 2u);
    EXPECT_EQ(on.front(), late.back() + kIntervalMs);
    EXPECT_TRUE(EveryStep(on, kIntervalMs));
    // The parent counts the same: every occurrence from the first to the
    // last made is either fired or skipped, and skipped only by misfire.
    const v1::RecurringStatus& r = paused[p.id].recurring();
    EXPECT_EQ(paused[p.id].state(), v1::JOB_STATE_PAUSED);
    EXPECT_EQ(r.occurrences_skipped(), want_skipped);
    EXPECT_EQ(r.occurrences_fired(), created.size());
    EXPECT_EQ(Ms(r.last_occurrence()), on.back());
    EXPECT_EQ(
        r.occurrences_fired() + r.occurrences_skipped(),
        static_cast<uint64_t>((on.back() - pre.front()) / kIntervalMs + 1));
  }
}

// Overlap SKIP (the default). While the first occurrence is held
// unacked, each later one is passed over (counted skipped, no child made);
// once it is acked, the next occurrence is delivered.
TEST_F(RecurringJobsTest, OverlapSkipPassesOverOccurrencesUntilTheAck) {
  TestSubscriber& sub = SubscribeNow("overlap", /*auto_ack=*/false);
  MustSchedule(Every("overlap", "o", absl::Seconds(1)));
  ASSERT_TRUE(sub.WaitFor(1));
  const Received first = sub.at(0);
  const std::string first_id = first.delivery.job().id();
  ASSERT_TRUE(Eventually(
      [&] {
        return Parent("overlap", "o").recurring().occurrences_skipped() >= 3;
      },
      absl::Seconds(30)));
  const v1::Job held = Parent("overlap", "o");
  EXPECT_EQ(held.recurring().occurrences_fired(), 1u);
  EXPECT_EQ(Ms(held.recurring().last_occurrence()), NominalMs(first));
  EXPECT_EQ(ListIds("overlap"), (std::vector<std::string>{"o", first_id}));
  EXPECT_EQ(sub.count(), 1u);

  EXPECT_EQ(delivery_->AckCode(first.delivery.ack_token()),
            grpc::StatusCode::OK);
  ASSERT_TRUE(sub.WaitFor(2, absl::Seconds(30)));
  const Received second = sub.at(1);
  EXPECT_NE(second.delivery.job().id(), first_id);
  EXPECT_EQ(second.delivery.attempt(), 1u);
  // Later than every occurrence skipped while the first was held.
  EXPECT_GT(
      NominalMs(second),
      NominalMs(first) +
          static_cast<int64_t>(held.recurring().occurrences_skipped()) * 1000);
  // Every occurrence handled so far is the first, the second, or skipped
  // (the second is held now, so skipping goes on).
  const v1::Job now = Parent("overlap", "o");
  EXPECT_EQ(now.recurring().occurrences_fired(), 2u);
  EXPECT_EQ(Ms(now.recurring().last_occurrence()), NominalMs(second));
  EXPECT_EQ(
      now.recurring().occurrences_fired() +
          now.recurring().occurrences_skipped(),
      static_cast<uint64_t>(
          (Ms(now.recurring().next_occurrence()) - NominalMs(first)) / 1000));
  EXPECT_EQ(sub.count(), 2u);

  // The metrics count what the parent says: two fired, the skipped ones
  // overlapped (the parent goes on skipping meanwhile), none misfired.
  std::string metrics;
  auto value = [&](const std::string& name) -> double {
    const std::string line = name + "{topic=\"overlap\"} ";
    const size_t at = metrics.find(line);
    if (at == std::string::npos) return -1;
    return std::stod(metrics.substr(at + line.size(), 24));
  };
  // A skip is written to the parent, then counted: the count catches up.
  EXPECT_TRUE(Eventually([&] {
    metrics = ScrapeMetrics(server_->http_address());
    return value("delayd_occurrences_overlapped_total") >=
           static_cast<double>(now.recurring().occurrences_skipped());
  })) << metrics;
  const v1::Job later = Parent("overlap", "o");
  EXPECT_EQ(value("delayd_occurrences_fired_total"), 2) << metrics;
  const double overlapped = value("delayd_occurrences_overlapped_total");
  EXPECT_LE(overlapped,
            static_cast<double>(later.recurring().occurrences_skipped()));
  EXPECT_EQ(value("delayd_occurrences_misfired_total"), 0) << metrics;
}

// Paused, no occurrence fires and GetJob shows PAUSED; resumed, the
// occurrences that fell due in the pause are seconds late, not misfired
// (more than 60 s), so each fires, and the schedule goes on; canceled, no
// child is made any more and the parent is gone (no --retention).
TEST_F(RecurringJobsTest, PauseResumeAndCancel) {
  TestSubscriber& sub = SubscribeNow("pause", /*auto_ack=*/true);
  MustSchedule(Every("pause", "p", absl::Seconds(1), v1::OVERLAP_POLICY_ALLOW));
  ASSERT_TRUE(sub.WaitFor(2));
  Reply<v1::PauseJobResponse> pause = client_->PauseJob("pause", "p");
  ASSERT_RPC_OK(pause);
  EXPECT_EQ(pause.response.job().state(), v1::JOB_STATE_PAUSED);
  const int64_t paused_last =
      Ms(pause.response.job().recurring().last_occurrence());
  const uint64_t paused_fired =
      pause.response.job().recurring().occurrences_fired();

  // Nothing may happen here, so the test waits out several intervals.
  absl::SleepFor(absl::Milliseconds(3500));
  const v1::Job still = Parent("pause", "p");
  EXPECT_EQ(still.state(), v1::JOB_STATE_PAUSED);
  EXPECT_EQ(still.recurring().occurrences_fired(), paused_fired);
  EXPECT_EQ(Ms(still.recurring().last_occurrence()), paused_last);
  EXPECT_EQ(Nominals(sub.received()).size(), paused_fired);
  EXPECT_EQ(Nominals(sub.received()).back(), paused_last);

  Reply<v1::ResumeJobResponse> resume = client_->ResumeJob("pause", "p");
  ASSERT_RPC_OK(resume);
  EXPECT_EQ(resume.response.job().state(), v1::JOB_STATE_SCHEDULED);
  ASSERT_TRUE(Eventually(
      [&] { return Nominals(sub.received()).back() >= paused_last + 5000; },
      absl::Seconds(30)));
  const std::vector<int64_t> resumed = Nominals(sub.received());
  EXPECT_TRUE(EveryStep(resumed, 1000));  // none passed over
  EXPECT_EQ(Parent("pause", "p").recurring().occurrences_skipped(), 0u);

  Reply<v1::CancelResponse> cancel = client_->Cancel("pause", "p");
  ASSERT_RPC_OK(cancel);
  const absl::Time canceled = absl::Now();
  EXPECT_EQ(cancel.response.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  const int64_t last = Ms(cancel.response.job().recurring().last_occurrence());
  EXPECT_EQ(client_->GetJob("pause", "p").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  // The children made before the cancel are delivered; no other comes.
  EXPECT_TRUE(
      Eventually([&] { return Nominals(sub.received()).back() == last; }));
  absl::SleepFor(absl::Milliseconds(3000));
  for (const Received& r : sub.received()) {
    EXPECT_LE(NominalMs(r), last) << r.delivery.job().id();
    EXPECT_LE(absl::FromUnixMillis(CreatedMs(r)), canceled)
        << r.delivery.job().id();
  }
  EXPECT_EQ(client_->GetJob("pause", "p").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// An occurrence that goes DEAD (max_attempts 1, nacked) is not live,
// so overlap SKIP does not hold the next one back.
TEST_F(RecurringJobsTest, ADeadOccurrenceDoesNotStopTheNext) {
  TestSubscriber& sub = SubscribeNow("dead", /*auto_ack=*/false);
  v1::JobSpec spec = Every("dead", "d", absl::Seconds(1));
  *spec.mutable_retry() = RetryOf(1, absl::Seconds(30));
  MustSchedule(spec);
  ASSERT_TRUE(sub.WaitFor(1));
  const Received first = sub.at(0);
  Reply<v1::NackResponse> nack =
      delivery_->Nack(first.delivery.ack_token(), std::nullopt, "bad input");
  ASSERT_RPC_OK(nack);
  EXPECT_EQ(nack.response.job().state(), v1::JOB_STATE_DEAD);

  ASSERT_TRUE(sub.WaitFor(2, absl::Seconds(30)));
  const Received second = sub.at(1);
  EXPECT_GT(NominalMs(second), NominalMs(first));
  EXPECT_EQ(second.delivery.job().occurrence_of().id(), "d");
  EXPECT_EQ(second.delivery.attempt(), 1u);
  Reply<v1::Job> dead = client_->GetJob("dead", first.delivery.job().id());
  ASSERT_RPC_OK(dead);
  EXPECT_EQ(dead.response.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(client_->StatsOf("dead").dead(), 1u);
  EXPECT_EQ(delivery_->AckCode(second.delivery.ack_token()),
            grpc::StatusCode::OK);
}

}  // namespace
}  // namespace delayd::testing
