// DeliveryMetrics: the counters of the job flow by topic —
// delayd_jobs_{scheduled,canceled,fired,delivered,acked,nacked,redelivered,
// dead_lettered}_total{topic}, the recurring jobs' occurrences
// delayd_occurrences_{fired,misfired,overlapped}_total{topic} — and the fire
// lateness histogram
// delayd_fire_lateness_seconds (delivery send time minus due time). A topic's
// counters are created on its first use and cached, so a hot path pays one map
// lookup per batch and an atomic add. Thread-safe.
#ifndef DELAYD_SERVER_METRICS_DELIVERY_METRICS_H_
#define DELAYD_SERVER_METRICS_DELIVERY_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace delayd::server {

class DeliveryMetrics {
 public:
  // One topic's counters. Pointers stay valid for the object's life.
  struct Topic {
    prometheus::Counter* scheduled;      // created or replaced by Schedule
    prometheus::Counter* canceled;       // canceled (also in flight)
    prometheus::Counter* fired;          // fell due (moved to the ready queue)
    prometheus::Counter* delivered;      // sent to a subscriber (any attempt)
    prometheus::Counter* acked;          // acked (finished)
    prometheus::Counter* nacked;         // given back by Nack
    prometheus::Counter* redelivered;    // delivered with attempt > 1
    prometheus::Counter* dead_lettered;  // moved to DEAD
    // Occurrences of recurring jobs: made into jobs; passed over by the
    // misfire policy; passed over by the overlap policy.
    prometheus::Counter* occurrences_fired;
    prometheus::Counter* occurrences_misfired;
    prometheus::Counter* occurrences_overlapped;
  };

  // Registers the families in `registry`, which must outlive this object.
  explicit DeliveryMetrics(prometheus::Registry& registry);
  // Uses a registry of its own, scraped by nobody (for tests).
  DeliveryMetrics();
  DeliveryMetrics(const DeliveryMetrics&) = delete;
  DeliveryMetrics& operator=(const DeliveryMetrics&) = delete;

  const Topic& For(absl::string_view topic);

  // One delivery sent `seconds` after its due time (negative: clamped to 0).
  void ObserveLateness(double seconds);

  // The topic's fired and acked counters; zero (and nothing created) for a
  // topic never counted.
  struct Totals {
    uint64_t fired = 0;
    uint64_t acked = 0;
  };
  Totals TotalsOf(absl::string_view topic);
  // The lateness histogram: ascending upper bounds (the last +Inf), with
  // cumulative counts.
  struct Bucket {
    double le_seconds;
    uint64_t count;
  };
  std::vector<Bucket> Lateness() const;

 private:
  explicit DeliveryMetrics(std::shared_ptr<prometheus::Registry> own);
  DeliveryMetrics(std::shared_ptr<prometheus::Registry> own,
                  prometheus::Registry& registry);

  const std::shared_ptr<prometheus::Registry> own_registry_;  // or null
  prometheus::Family<prometheus::Counter>& scheduled_;
  prometheus::Family<prometheus::Counter>& canceled_;
  prometheus::Family<prometheus::Counter>& fired_;
  prometheus::Family<prometheus::Counter>& delivered_;
  prometheus::Family<prometheus::Counter>& acked_;
  prometheus::Family<prometheus::Counter>& nacked_;
  prometheus::Family<prometheus::Counter>& redelivered_;
  prometheus::Family<prometheus::Counter>& dead_lettered_;
  prometheus::Family<prometheus::Counter>& occurrences_fired_;
  prometheus::Family<prometheus::Counter>& occurrences_misfired_;
  prometheus::Family<prometheus::Counter>& occurrences_overlapped_;
  prometheus::Histogram& lateness_;

  absl::Mutex mu_;
  // node_hash_map: references to values stay valid across inserts.
  absl::node_hash_map<std::string, Topic> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_DELIVERY_METRICS_H_
