// End to end, a first measurement of fire lateness (receive time minus due
// time) against the real binary: 10,000 jobs spread over one second, two
// subscribers with room for all of them. Prints the percentiles; asserts
// only never-early and a loose bound, so that a busy machine does not fail
// it. The load generator of issue 8 measures properly. Then /metrics must
// show the same flow.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/delivery_fixture.h"

namespace delayd::testing {
namespace {

// DELAYD_LATENESS_JOBS (a multiple of 1000) overrides the 10,000 jobs.
int JobCount() {
  const char* env = std::getenv("DELAYD_LATENESS_JOBS");
  const int n = env == nullptr ? 0 : std::atoi(env);
  return n >= 1000 ? n / 1000 * 1000 : 10'000;
}

TEST_F(DeliveryTest, LatenessOfTenThousandJobsDueWithinOneSecond) {
  const int kJobs = JobCount();
  const uint32_t credit = std::min(kJobs, 10'000);
  std::vector<TestSubscriber*> subs = {
      &Subscribe("late", credit, kJobs > 20'000),
      &Subscribe("late", credit, kJobs > 20'000)};
  ASSERT_TRUE(
      Eventually([&] { return client_->StatsOf("late").subscribers() == 2; }));
  const absl::Time start =
      absl::Now() + absl::Seconds(2) + absl::Milliseconds(kJobs / 100);
  for (int b = 0; b < kJobs / 1000; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 1000; ++i) {
      const int n = b * 1000 + i;
      *batch.add_requests() = Request(SpecAt(
          "late", absl::StrCat("j", n), start + absl::Milliseconds(n % 1000)));
    }
    auto reply = client_->ScheduleBatch(batch);
    ASSERT_RPC_OK(reply);
  }
  ASSERT_TRUE(Eventually(
      [&] {
        return subs[0]->count() + subs[1]->count() >=
               static_cast<size_t>(kJobs);
      },
      absl::Seconds(60) + absl::Milliseconds(kJobs)));
  std::vector<double> ms;
  for (TestSubscriber* sub : subs) {
    for (const Received& r : sub->received()) {
      ms.push_back(absl::ToDoubleMilliseconds(
          r.at - FromProto(r.delivery.job().fire_at())));
    }
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::fprintf(stderr,
               "fire lateness over %zu deliveries (ms): p50 %.2f p90 %.2f "
               "p99 %.2f max %.2f\n",
               ms.size(), pct(0.5), pct(0.9), pct(0.99), ms.back());
  EXPECT_GE(ms.front(), 0.0);
  EXPECT_LT(pct(0.5), 1000.0);

  if (kJobs != 10'000) return;  // the checks below assume the default
  // A round is counted delivered after its send: wait for the count.
  std::string metrics;
  EXPECT_TRUE(Eventually([&] {
    metrics = ScrapeMetrics(server_->http_address());
    return metrics.find("delayd_jobs_delivered_total{topic=\"late\"} 10000") !=
           std::string::npos;
  }));
  for (const std::string& line :
       {std::string("delayd_jobs_fired_total{topic=\"late\"} 10000"),
        std::string("delayd_jobs_delivered_total{topic=\"late\"} 10000"),
        std::string("delayd_fire_lateness_seconds_count 10000"),
        std::string("delayd_subscribers{topic=\"late\"} 2"),
        std::string("delayd_jobs{topic=\"late\",state=\"in_flight\"} 10000")}) {
    EXPECT_NE(metrics.find(line), std::string::npos)
        << "no \"" << line << "\" in\n"
        << metrics;
  }
}

}  // namespace
}  // namespace delayd::testing
