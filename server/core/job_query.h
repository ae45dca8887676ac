// JobQuery: the read-only rpcs — GetJob, ListJobs (paged by id, filtered by
// state, id prefix and due range, a page never over the reply limit) and
// GetStats (per-topic counts from the TopicTable, and the jobs due within
// a minute, an hour and a day from a scan of the due index), and
// PreviewSchedule (a recurrence's next occurrences, from the calendar
// alone: nothing read or stored). Reads the
// store without key locks: a read sees each record as some write left it,
// with its lease overlaid (Deliverer::OverlayLeases).
//
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_JOB_QUERY_H_
#define DELAYD_SERVER_CORE_JOB_QUERY_H_

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/due_book.h"
#include "server/jobs/limits.h"
#include "server/jobs/terminal_state_counter.h"
#include "server/jobs/topic_table.h"
#include "server/metrics/delivery_metrics.h"
#include "server/timer/clock.h"
#include "storage/job_store.h"

namespace delayd::server {

class JobQuery {
 public:
  // All must outlive it.
  JobQuery(const storage::JobStore* store, timer::Clock* clock,
           const Limits* limits, const TopicTable* topics,
           const TerminalStateCounter* terminal, DueBook* due,
           DeliveryMetrics* metrics, Deliverer* deliverer)
      : store_(store),
        clock_(clock),
        limits_(limits),
        topics_(topics),
        terminal_(terminal),
        due_(due),
        metrics_(metrics),
        deliverer_(deliverer) {}
  JobQuery(const JobQuery&) = delete;
  JobQuery& operator=(const JobQuery&) = delete;

  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& req) const;
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const v1::ListJobsRequest& req) const;
  absl::StatusOr<v1::GetStatsResponse> GetStats(
      const v1::GetStatsRequest& req) const;
  absl::StatusOr<v1::PreviewScheduleResponse> PreviewSchedule(
      const v1::PreviewScheduleRequest& req) const;

 private:
  const storage::JobStore* const store_;
  timer::Clock* const clock_;
  const Limits* const limits_;
  const TopicTable* const topics_;
  const TerminalStateCounter* const terminal_;
  DueBook* const due_;
  DeliveryMetrics* const metrics_;
  Deliverer* const deliverer_;  // overlays the leases on what is read
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_JOB_QUERY_H_
