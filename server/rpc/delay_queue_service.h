// DelayQueueService: the gRPC handlers of delayd.v1.DelayQueue, on gRPC's
// callback API. Unary rpcs are registered as raw methods: the request bytes
// are parsed here (request_parser.h) so that even a request protobuf itself
// refuses (invalid UTF-8 in a string) gets INVALID_ARGUMENT naming the
// field. A unary call runs the JobService on a worker thread, never on
// gRPC's callback thread: each can wait (for a key lock held through a
// synced write, a RocksDB write stall, an fsync, a long scan), and gRPC has
// as few as two callback threads for every call and stream. Schedule,
// Reschedule and Cancel are the exceptions: each is decided on gRPC's thread
// when its job's key lock is free (JobWriter::ScheduleAsync,
// RescheduleAsync, CancelAsync), and its write goes to the CommitQueue, which
// replies after the fsync (under --sync=none the gRPC thread writes and
// replies itself, unless the write would stall); one whose lock is held runs
// on a worker as the others do. The workers are three pools, so that one kind
// of wait does not starve the others: writes (Schedule, ScheduleBatch,
// Reschedule, Cancel, CancelByPrefix, Redrive), lease transitions (Ack, Nack,
// ExtendLease), and reads (GetJob, ListJobs, GetStats, PreviewSchedule), which
// answer even while every writer waits. The reactor is finished with the status
// converted in one place. An rpc not registered here answers UNIMPLEMENTED (the
// generated default). Subscribe returns a SubscribeReactor
// (subscribe_reactor.h), which streams what the Deliverer hands it;
// ScheduleStream a ScheduleStreamReactor (schedule_stream_reactor.h), which
// runs its requests on the writers' pool in batches.
//
// Access (core/access.h) decides who may call what, and QuotaKeeper how much:
// each call is authenticated, its request authorized and admitted by the
// quotas on gRPC's thread, before any worker runs it.
//
// Until StartServing (recovery) and from StartDraining on, calls are refused
// with UNAVAILABLE.
// Thread-safe: gRPC calls the handlers from its own threads.
#ifndef DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
#define DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_

#include <atomic>

#include "absl/functional/any_invocable.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "server/core/access.h"
#include "server/core/job_service.h"
#include "server/core/quota_keeper.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/worker_pool.h"

namespace delayd::server {

class DelayQueueService final : public v1::DelayQueue::CallbackService {
 public:
  // `jobs`, `metrics`, `access` and `quotas` must outlive the service; null
  // `access` is open access, null `quotas` no quota. `write_threads`: the
  // writers' pool; as many synced writes can share one fsync.
  DelayQueueService(JobService* jobs, RpcMetrics* metrics,
                    const Access* access = nullptr,
                    QuotaKeeper* quotas = nullptr, int write_threads = 16);
  DelayQueueService(const DelayQueueService&) = delete;
  DelayQueueService& operator=(const DelayQueueService&) = delete;

  void StartServing() { state_ = State::kServing; }
  // From now on, new calls answer UNAVAILABLE.
  void StartDraining() { state_ = State::kDraining; }

  grpc::ServerWriteReactor<v1::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* context,
      const v1::SubscribeRequest* request) override;

 private:
  // Threads of the lease-transition and read pools: these calls do not
  // wait for an fsync, so a few threads keep up. Two lease threads, not
  // four: in a herd the acks of four subscribers came on four threads at
  // once, and on two cores each more thread writing the memtables beside
  // the delivery and fire threads cost more than it added (a herd of 300k
  // drained faster with one or two in each of 9 alternated pairs;
  // BENCHMARKS.md, "Issue 19: a lighter load generator, two lease threads,
  // writers that block"). Two, so that one Ack waiting for a key lock does
  // not hold up the rest.
  static constexpr int kLeaseThreads = 2;
  static constexpr int kReadThreads = 4;
  // Which pool runs a call (see the class comment).
  enum class Pool { kWrites, kLeases, kReads };
  // A JobService method that starts a call without waiting, and answers
  // it through the callback (from another thread, later, or at once), or
  // returns false, having done nothing, when it would have had to wait.
  template <typename Request, typename Response>
  using AsyncStart = bool (JobService::*)(
      const Request&, absl::AnyInvocable<void(absl::StatusOr<Response>) &&>&);
  // Registers `method` of the JobService as raw unary method `index` of the
  // service (the method's position in delayd.proto). With `async`, a call
  // is first started on gRPC's thread, and runs `method` on `pool` only
  // when `async` declines it.
  template <typename Request, typename Response>
  void RegisterUnary(
      int index, const char* name,
      absl::StatusOr<Response> (JobService::*method)(const Request&), Pool pool,
      AsyncStart<Request, Response> async = nullptr);

  // The caller of a call; open access when access_ is null.
  absl::StatusOr<Caller> Authenticate(
      const grpc::CallbackServerContext& context) const;

  JobService* const jobs_;
  RpcMetrics* const metrics_;
  const Access* const access_;
  QuotaKeeper* const quotas_;
  enum class State { kRecovering, kServing, kDraining };
  std::atomic<State> state_{State::kRecovering};
  WorkerPool writes_;
  WorkerPool leases_;
  WorkerPool reads_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
