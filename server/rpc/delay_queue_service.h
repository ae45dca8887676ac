// DelayQueueService: delayd's gRPC face, delayd.v1.DelayQueue and
// grpc.health.v1.Health, served on gRPC's async API: one thread polls one
// completion queue and runs every call's handler (async_call.h says why).
// Unary rpcs are raw methods (raw_services.h): the request bytes are parsed
// here (request_parser.h) so that even a request protobuf itself refuses
// (invalid UTF-8 in a string) gets INVALID_ARGUMENT naming the field.
//
// Nothing that can wait runs on the polling thread: a unary call runs the
// JobService on a worker thread, since each can wait (for a key lock held
// through a synced write, a RocksDB write stall, an fsync, a long scan).
// Schedule, Reschedule and Cancel are the exceptions: each is decided on the
// polling thread when its job's key lock is free (JobWriter::ScheduleAsync,
// RescheduleAsync, CancelAsync), and its write goes to the CommitQueue, which
// replies after the fsync. Under --sync=none the polling thread writes and
// replies itself: it gathers the writes of the calls it took in one turn
// (every event already queued) and writes them as one store write at the
// turn's end, unless that would stall (JobWriter::WriteGathered). One whose
// lock is held runs on a worker as the others do. The workers are three pools,
// so that one kind of wait does not starve the others: writes (Schedule,
// ScheduleBatch, Reschedule, Cancel, CancelByPrefix, Redrive, PauseJob,
// ResumeJob), lease transitions (Ack, Nack, ExtendLease), and reads (GetJob,
// ListJobs, GetStats, PreviewSchedule), which answer even while every writer
// waits. Subscribe is a SubscribeReactor (subscribe_reactor.h), which streams
// what the Deliverer hands it; ScheduleStream a ScheduleStreamReactor
// (schedule_stream_reactor.h), which runs its requests in batches, on the
// writers' pool, or under --sync=none as the unary Schedule runs.
//
// Access (core/access.h) decides who may call what, and QuotaKeeper how much:
// each call is authenticated, its request authorized and admitted by the
// quotas on the polling thread, before any worker runs it.
//
// Health: "" and "delayd.v1.DelayQueue" are SERVING from StartServing to
// StartDraining, NOT_SERVING otherwise; any other name is NOT_FOUND (Check)
// or SERVICE_UNKNOWN (Watch). Watch streams end when the server drains.
//
// Until StartServing (recovery) and from StartDraining on, calls are refused
// with UNAVAILABLE.
//
// Use: Register with the builder, build and start the grpc::Server, Start;
// to stop, StartDraining, shut the grpc::Server down, then Stop (or destroy).
// Thread-safe.
#ifndef DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
#define DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/alarm.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_builder.h"
#include "server/core/access.h"
#include "server/core/job_service.h"
#include "server/core/quota_keeper.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/async_call.h"
#include "server/rpc/raw_services.h"
#include "server/rpc/schedule_stream_reactor.h"
#include "server/rpc/subscribe_reactor.h"
#include "server/rpc/worker_pool.h"

namespace delayd::server {

class DelayQueueService {
 public:
  // The name under which the job API reports its health.
  static constexpr char kServiceName[] = "delayd.v1.DelayQueue";

  // `jobs`, `metrics`, `access` and `quotas` must outlive the service; null
  // `access` is open access, null `quotas` no quota. `write_threads`: the
  // writers' pool; as many synced writes can share one fsync.
  DelayQueueService(JobService* jobs, RpcMetrics* metrics,
                    const Access* access = nullptr,
                    QuotaKeeper* quotas = nullptr, int write_threads = 16);
  DelayQueueService(const DelayQueueService&) = delete;
  DelayQueueService& operator=(const DelayQueueService&) = delete;
  ~DelayQueueService();

  // Before the builder builds the server: registers both services and the
  // completion queue.
  void Register(grpc::ServerBuilder& builder);
  // Once the server is started: requests calls and starts polling.
  void Start();

  void StartServing();
  // From now on, new calls answer UNAVAILABLE, health is NOT_SERVING and
  // Watch streams end.
  void StartDraining();

  // Once the grpc::Server is shut down: runs what the workers hold, waits
  // for every call to be answered, then stops polling. Idempotent.
  void Stop();

 private:
  class UnaryCall;
  class HealthCheck;
  class HealthWatch;

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
  // Calls requested ahead, per method: each arrival requests the next.
  static constexpr int kRequestedWrites = 16;
  static constexpr int kRequestedOthers = 4;
  // Which pool runs a call (see the class comment).
  enum class Pool { kWrites, kLeases, kReads };
  // A JobService method that starts a call without waiting, and answers
  // it through the callback (from another thread, later, or at once), or
  // returns false, having done nothing, when it would have had to wait.
  template <typename Request, typename Response>
  using AsyncStart = bool (JobService::*)(
      const Request&, absl::AnyInvocable<void(absl::StatusOr<Response>) &&>&);
  // A unary method: its index in delayd.proto's service DelayQueue, and
  // what runs a call of it.
  struct UnaryMethod {
    int index = 0;
    std::function<void(UnaryCall&)> handle;
  };
  // Adds `method` of the JobService as raw unary method `index`. With
  // `async`, a call is first started on the polling thread, and runs
  // `method` on `pool` only when `async` declines it.
  template <typename Request, typename Response>
  void AddUnary(int index, const char* name,
                absl::StatusOr<Response> (JobService::*method)(const Request&),
                Pool pool, AsyncStart<Request, Response> async = nullptr);
  template <typename Request, typename Response>
  void Handle(UnaryCall& call, const char* name,
              absl::StatusOr<Response> (JobService::*method)(const Request&),
              Pool pool, AsyncStart<Request, Response> async);

  // The caller of a call; open access when access_ is null.
  absl::StatusOr<Caller> Authenticate(
      const grpc::ServerContextBase& context) const;
  // UNAVAILABLE unless serving.
  absl::Status Refusal() const;
  bool Serving() const { return state_ == State::kServing; }

  void Poll();
  // The answers made while the polling thread took the events that came
  // together, sent together.
  void SendAnswers();
  // On the polling thread, once Stop asks: no call is requested after it.
  void ShutdownQueue(bool ok);
  // Health Watch streams: told of each change, ended by StartDraining.
  void NotifyWatchers();

  JobService* const jobs_;
  RpcMetrics* const metrics_;
  const Access* const access_;
  QuotaKeeper* const quotas_;
  enum class State { kRecovering, kServing, kDraining };
  std::atomic<State> state_{State::kRecovering};
  std::unique_ptr<WorkerPool> writes_;
  std::unique_ptr<WorkerPool> leases_;
  std::unique_ptr<WorkerPool> reads_;

  RawDelayQueue raw_;
  AsyncHealth health_;
  std::vector<UnaryMethod> unary_;
  SubscribeReactor::OnArrival subscribe_arrival_;
  ScheduleStreamReactor::OnArrival stream_arrival_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread poller_;
  // Calls arrived and not yet over: Stop waits for them.
  OpenCalls open_;
  // Polling thread only: the answers SendAnswers sends.
  std::vector<std::pair<UnaryCall*, grpc::Status>> answers_;
  // Set on the polling thread; read there and by Stop once it is joined.
  bool queue_shut_ = false;
  grpc::Alarm stop_alarm_;
  MemberTag<DelayQueueService> stop_tag_{this,
                                         &DelayQueueService::ShutdownQueue};
  bool stopped_ = false;  // Stop's caller only

  absl::Mutex watchers_mu_;
  std::set<HealthWatch*> watchers_ ABSL_GUARDED_BY(watchers_mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_DELAY_QUEUE_SERVICE_H_
