#include "server/metrics/quota_metrics.h"

namespace delayd::server {

QuotaMetrics::QuotaMetrics(prometheus::Registry& registry)
    : admitted_(prometheus::BuildCounter()
                    .Name("delayd_principal_jobs_admitted_total")
                    .Help("Jobs of Schedule and ScheduleBatch calls let "
                          "through the quotas, by principal")
                    .Register(registry)),
      admitted_bytes_(prometheus::BuildCounter()
                          .Name("delayd_principal_payload_bytes_admitted_total")
                          .Help("Payload bytes of the jobs of Schedule and "
                                "ScheduleBatch calls let through the quotas, "
                                "by principal")
                          .Register(registry)),
      subscriptions_(prometheus::BuildGauge()
                         .Name("delayd_principal_subscriptions")
                         .Help("Subscribe streams open, by principal")
                         .Register(registry)),
      refusals_(prometheus::BuildCounter()
                    .Name("delayd_quota_refusals_total")
                    .Help("Calls refused with RESOURCE_EXHAUSTED by a quota, "
                          "by principal and quota")
                    .Register(registry)) {}

// prometheus-cpp's Add finds the series of these labels, or makes it, under
// the family's own lock.
void QuotaMetrics::Admitted(absl::string_view principal, int64_t jobs,
                            int64_t payload_bytes) {
  admitted_.Add({{"principal", std::string(principal)}})
      .Increment(static_cast<double>(jobs));
  admitted_bytes_.Add({{"principal", std::string(principal)}})
      .Increment(static_cast<double>(payload_bytes));
}

void QuotaMetrics::Subscriptions(absl::string_view principal, int64_t open) {
  subscriptions_.Add({{"principal", std::string(principal)}})
      .Set(static_cast<double>(open));
}

void QuotaMetrics::Refused(absl::string_view principal,
                           absl::string_view quota) {
  refusals_
      .Add({{"principal", std::string(principal)},
            {"quota", std::string(quota)}})
      .Increment();
}

}  // namespace delayd::server
