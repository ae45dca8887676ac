// Deliverer: the metrics the delivery flow moves — the job-flow counters
// by topic (fired, delivered, redelivered, nacked, dead-lettered, acked,
// scheduled, canceled), fire lateness, and the due-within gauges — by the
// fake clock.
#include <map>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/core/jobs_collector.h"
#include "server/metrics/delivery_metrics.h"
#include "tests/server/delivery/deliverer_test_util.h"

namespace delayd::server::testing {
namespace {

// The value of `family{topic}` in `registry` (counter or histogram count).
double MetricValue(prometheus::Registry& registry, const std::string& family,
                   const std::string& topic = "") {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      const bool match =
          topic.empty() || (m.label.size() == 1 && m.label[0].name == "topic" &&
                            m.label[0].value == topic);
      if (!match) continue;
      return f.type == prometheus::MetricType::Histogram
                 ? static_cast<double>(m.histogram.sample_count)
                 : m.counter.value;
    }
  }
  return -1;
}

TEST_F(DelivererTest, MetricsCountTheFlowByTopic) {
  prometheus::Registry registry;
  DeliveryMetrics metrics(registry);
  service_ = std::make_unique<JobService>(&store_, &clock_, limits_, &metrics);
  absl::Cleanup stop = [this] { service_.reset(); };  // before `metrics`
  service().Start();
  Sub sub = Subscribe("m");
  MustScheduleWith("m", "a", 0, Retry(2, 30'000));
  MustSchedule("m", "b", 0);
  ASSERT_TRUE(sub.sink->WaitFor(2));
  const std::string a_token = sub.sink->at(0).job().id() == "a"
                                  ? sub.sink->at(0).ack_token()
                                  : sub.sink->at(1).ack_token();
  const std::string b_token = sub.sink->at(0).job().id() == "b"
                                  ? sub.sink->at(0).ack_token()
                                  : sub.sink->at(1).ack_token();
  ASSERT_OK(Nack(a_token, 0));
  ASSERT_TRUE(sub.sink->WaitFor(3));
  ASSERT_OK(Nack(sub.sink->at(2).ack_token(), 0));  // out of attempts: DEAD
  EXPECT_EQ(AckCode(b_token), absl::StatusCode::kOk);
  Quiesce();
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_fired_total", "m"), 2);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_delivered_total", "m"), 3);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_redelivered_total", "m"), 1);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_nacked_total", "m"), 2);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_dead_lettered_total", "m"), 1);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_acked_total", "m"), 1);
  EXPECT_EQ(MetricValue(registry, "delayd_fire_lateness_seconds"), 3);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_scheduled_total", "m"), 2);
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_canceled_total", "m"), 0);

  // Scheduled counts creations and replacements, not identical retries;
  // canceled counts cancels that took effect.
  MustSchedule("m", "c", 30'000);
  MustSchedule("m", "c", 30'000);  // identical retry: nothing new
  ASSERT_OK(service().Schedule(
      ScheduleReq("m", "c", 45'000, "", v1::IF_EXISTS_REPLACE)));
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_scheduled_total", "m"), 4);
  ASSERT_OK(service().Cancel(CancelReq("m", "c")));
  ASSERT_OK(service().Cancel(CancelReq("m", "c")));  // NOT_FOUND
  EXPECT_EQ(MetricValue(registry, "delayd_jobs_canceled_total", "m"), 1);
}

// delayd_jobs_due_within{topic,window} of a collector over `service`.
std::map<std::string, double> DueWithin(JobService& service,
                                        const std::string& topic) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : JobsCollector(&service).Collect()) {
    if (f.name != "delayd_jobs_due_within") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : m.label) labels[l.name] = l.value;
      if (labels["topic"] == topic) out[labels["window"]] = m.gauge.value;
    }
  }
  return out;
}

TEST_F(DelivererTest, DueWithinGaugesCountScheduledJobsByWindow) {
  service().Start();
  MustSchedule("w", "soon", 30'000);             // 30 s
  MustSchedule("w", "later", 30 * 60'000);       // 30 min
  MustSchedule("w", "tomorrow", 20 * 3600'000);  // 20 h
  MustSchedule("w", "far", 48 * 3600'000);       // 2 days
  EXPECT_THAT(
      DueWithin(service(), "w"),
      ::testing::ElementsAre(::testing::Pair("1d", 3), ::testing::Pair("1h", 2),
                             ::testing::Pair("1m", 1)));
}

}  // namespace
}  // namespace delayd::server::testing
