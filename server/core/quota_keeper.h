// QuotaKeeper: the quotas of the auth file's principals (auth_config.h,
// `quota` lines), kept across calls (docs/security.md, "Quotas").
//
// A call that would take a principal past a quota is refused with
// RESOURCE_EXHAUSTED naming the quota, before the job service runs it, so
// nothing is written; a ScheduleBatch is admitted or refused whole:
//   * schedules_per_second: a token bucket per principal, refilled at RATE
//     per second up to `burst`; each job of Schedule and ScheduleBatch takes
//     one token;
//   * pending PATTERN N: the live jobs (scheduled, ready, in flight) of the
//     topics PATTERN matches, as the job service counts them (TopicTable,
//     rebuilt from the store by recovery, so the counts survive a restart),
//     plus the jobs of calls admitted and still writing, plus the call's own
//     new jobs, must stay within N. A call counts every job it carries as
//     new (a retry of an existing id too);
//   * pending_bytes PATTERN N: the same, counting the payload bytes of
//     those jobs (TopicTable's live payload bytes, which recovery rebuilds
//     from the sizes in the due index) instead of the jobs;
//   * subscriptions N: Subscribe streams open at once.
// What a call reserved (pending jobs and bytes, a subscription) is held by
// its Ticket
// and given back when it goes: after the job service applied the
// write (the jobs then count as live), or when the stream ends. Tokens are
// spent for good.
//
// State is per principal name, so it outlives a reload of the auth file;
// the limits are the ones of the caller's file. Open access has no quota.
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_QUOTA_KEEPER_H_
#define DELAYD_SERVER_CORE_QUOTA_KEEPER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "server/core/access.h"
#include "server/jobs/topic_table.h"
#include "server/metrics/quota_metrics.h"
#include "server/timer/clock.h"

namespace delayd::server {

class QuotaKeeper {
 public:
  // What one call holds; gives it back when destroyed. Move-only.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }

    // Whether it holds anything to give back.
    bool held() const { return keeper_ != nullptr; }

   private:
    friend class QuotaKeeper;
    void Release();

    QuotaKeeper* keeper_ = nullptr;
    std::string principal_;
    // Pending jobs and payload bytes reserved, by pattern.
    std::vector<std::pair<std::string, int64_t>> pending_;
    std::vector<std::pair<std::string, int64_t>> pending_bytes_;
    bool subscription_ = false;
  };

  // Borrows all three; they must outlive the keeper. `metrics` may be null.
  QuotaKeeper(const TopicTable* topics, timer::Clock* clock,
              QuotaMetrics* metrics)
      : topics_(topics), clock_(clock), metrics_(metrics) {}
  QuotaKeeper(const QuotaKeeper&) = delete;
  QuotaKeeper& operator=(const QuotaKeeper&) = delete;

  // One job a call would add.
  struct NewJob {
    absl::string_view topic;
    int64_t payload_bytes = 0;
  };
  // These jobs, scheduled by `caller`.
  absl::StatusOr<Ticket> AdmitJobs(const Caller& caller,
                                   const std::vector<NewJob>& jobs);
  // One more Subscribe stream of `caller`.
  absl::StatusOr<Ticket> AdmitSubscription(const Caller& caller);

 private:
  struct State {
    double tokens = 0;
    int64_t refilled_ms = 0;
    bool started = false;
    // By pattern: the jobs and the payload bytes of calls still writing.
    absl::flat_hash_map<std::string, int64_t> reserved;
    absl::flat_hash_map<std::string, int64_t> reserved_bytes;
    int64_t subscriptions = 0;
  };

  absl::Status Refuse(const Caller& caller, absl::string_view quota,
                      std::string message);
  // Refuses when, for some quota of `quotas` (`kind`: "pending" or
  // "pending_bytes"), what is live and reserved plus `adding` (by quota)
  // passes its limit.
  absl::Status CheckPending(
      const Caller& caller, absl::string_view kind,
      const std::vector<auth::Quotas::Pending>& quotas,
      const std::vector<int64_t>& adding,
      const absl::flat_hash_map<std::string, int64_t>& reserved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TopicTable* const topics_;
  timer::Clock* const clock_;
  QuotaMetrics* const metrics_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, State> states_ ABSL_GUARDED_BY(mu_);
};

// The quotas a request answers to: Schedule and ScheduleBatch take jobs,
// Subscribe a stream; every other request nothing (an empty Ticket).
absl::StatusOr<QuotaKeeper::Ticket> Admit(QuotaKeeper* keeper,
                                          const Caller& caller,
                                          const v1::ScheduleRequest& request);
absl::StatusOr<QuotaKeeper::Ticket> Admit(
    QuotaKeeper* keeper, const Caller& caller,
    const v1::ScheduleBatchRequest& request);
absl::StatusOr<QuotaKeeper::Ticket> Admit(QuotaKeeper* keeper,
                                          const Caller& caller,
                                          const v1::SubscribeRequest& request);
template <typename Request>
absl::StatusOr<QuotaKeeper::Ticket> Admit(QuotaKeeper* /*keeper*/,
                                          const Caller& /*caller*/,
                                          const Request& /*request*/) {
  return QuotaKeeper::Ticket();
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_QUOTA_KEEPER_H_
