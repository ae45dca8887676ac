// QuotaMetrics: what the auth file's principals use of their quotas —
// delayd_principal_jobs_admitted_total{principal} (jobs Schedule and
// ScheduleBatch let through the quotas),
// delayd_principal_payload_bytes_admitted_total{principal} (their payload
// bytes), delayd_principal_subscriptions
// {principal} (Subscribe streams open), and
// delayd_quota_refusals_total{principal,quota} (calls refused with
// RESOURCE_EXHAUSTED). Series appear on first use; only principals of an auth
// file have them. Thread-safe.
#ifndef DELAYD_SERVER_METRICS_QUOTA_METRICS_H_
#define DELAYD_SERVER_METRICS_QUOTA_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace delayd::server {

class QuotaMetrics {
 public:
  explicit QuotaMetrics(prometheus::Registry& registry);
  QuotaMetrics(const QuotaMetrics&) = delete;
  QuotaMetrics& operator=(const QuotaMetrics&) = delete;

  void Admitted(absl::string_view principal, int64_t jobs,
                int64_t payload_bytes);
  void Subscriptions(absl::string_view principal, int64_t open);
  // `quota`: "schedules_per_second", "pending", "pending_bytes" or
  // "subscriptions".
  void Refused(absl::string_view principal, absl::string_view quota);

 private:
  prometheus::Family<prometheus::Counter>& admitted_;
  prometheus::Family<prometheus::Counter>& admitted_bytes_;
  prometheus::Family<prometheus::Gauge>& subscriptions_;
  prometheus::Family<prometheus::Counter>& refusals_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_QUOTA_METRICS_H_
