// ScheduleStreamReactor: one ScheduleStream call (delayd.proto) on the
// server's completion queue (async_call.h: a reactor's shape on gRPC's async
// API), raw bytes both ways, so that a request protobuf itself
// refuses gets INVALID_ARGUMENT naming its field, as a unary call does.
//
// It keeps one read outstanding while fewer than kMaxWaiting requests (and
// kMaxWaitingBytes of them) wait unanswered, and one write outstanding.
// Each message read is split into its requests, and each request is parsed
// (on its own, so a malformed one is refused alone), authorized and
// admitted by the quotas on the polling thread; a refused one is answered in
// its place in the order. The others run in batches of up to
// Limits::max_batch (and kMaxBatchBytes): one batch at a time per stream,
// so the answers keep the requests' order.
//   * Under --sync=always a batch goes to the writes pool, where
//     JobService::Stream decides and writes it (one fsync for a run of
//     Schedules); the worker that ends a batch runs the next one if it is
//     there, and the polling thread reads on meanwhile.
//   * Under --sync=none (inline writes) the polling thread runs each
//     request through the JobService's Async calls, as it runs a unary
//     Schedule: their writes are gathered with the other calls of its turn
//     and written together (JobWriter::WriteGathered). From the first
//     request whose job is locked (its write still gathered, or another
//     call's) the rest of the batch goes to a worker, which may wait. The
//     thread that answers a batch's last request starts the next one.
// A batch's answers are serialized on the thread that answers it; a write
// takes every answer serialized and not yet written, up to kMaxAnswerBytes,
// as one message (serialized messages concatenated are one message whose
// repeated field holds all their items).
//
// The stream ends OK once the client has half-closed and every request is
// answered and written; INVALID_ARGUMENT the same way after a message that
// cannot be split or holds over kMaxRequestsPerMessage requests (nothing
// after it is read); CANCELLED when the client cancels or a write fails.
// Finish is called only when no batch is running, so OnDone, which deletes
// the reactor, never races a thread that answers a batch. Callbacks never
// block: they take a short mutex; reads, writes and Finish are started outside
// it.
//
// Created and requested by DelayQueueService before its call arrives; on
// arrival the service authenticates the caller (Begin). Owns itself
// (deleted in OnDone, or on a call that never came).
#ifndef DELAYD_SERVER_RPC_SCHEDULE_STREAM_REACTOR_H_
#define DELAYD_SERVER_RPC_SCHEDULE_STREAM_REACTOR_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/core/access.h"
#include "server/core/job_service.h"
#include "server/core/quota_keeper.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/async_call.h"
#include "server/rpc/raw_services.h"
#include "server/rpc/worker_pool.h"

namespace delayd::server {

class ScheduleStreamReactor final
    : public AsyncStreamCall<
          grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>,
          grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Requests read and not yet answered, at most.
  static constexpr size_t kMaxWaiting = 1024;
  static constexpr size_t kMaxWaitingBytes = 16 << 20;
  // Requests in one message, at most (delayd.proto); fixed, not
  // --max-batch, so that every server takes what a client may send. A
  // message of more than max_batch is run in several batches.
  static constexpr size_t kMaxRequestsPerMessage = 1000;
  // Request bytes handed to one batch, at most (besides max_batch).
  static constexpr size_t kMaxBatchBytes = 8 << 20;
  // Bytes of answers written as one message, at most (unless one answer
  // alone is larger): well under gRPC's 4 MiB default receive limit.
  static constexpr size_t kMaxAnswerBytes = 1 << 20;

  // Requests one ScheduleStream call of `service` on `cq`. `on_arrival` is
  // called on the polling thread when it arrives, and calls Begin.
  // Everything borrowed must outlive the stream; null `quotas` is no quota.
  using OnArrival = std::function<void(ScheduleStreamReactor&)>;
  static void Request(RawDelayQueue* service, grpc::ServerCompletionQueue* cq,
                      OpenCalls* open, JobService* jobs, WorkerPool* writes,
                      RpcMetrics* metrics, QuotaKeeper* quotas,
                      const OnArrival* on_arrival);

  const grpc::ServerContext& call_context() { return *context(); }

  // Finishes at once with `refusal` when it is not OK (not serving, not
  // authenticated); otherwise starts reading as `caller`.
  void Begin(Caller caller, const absl::Status& refusal);

 private:
  ScheduleStreamReactor(OpenCalls* open, JobService* jobs, WorkerPool* writes,
                        RpcMetrics* metrics, QuotaKeeper* quotas,
                        const OnArrival* on_arrival);

  void Arrived(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // One request read, in order: to run, or answered already (refused).
  struct Entry {
    v1::StreamRequest request;
    bool refused = false;
    v1::StreamAnswer answer;     // when refused
    QuotaKeeper::Ticket ticket;  // what it reserved
    size_t bytes = 0;
    absl::Time read_at;
  };
  // Answers serialized as a ScheduleStreamResponse, not yet written.
  struct Answers {
    grpc::Slice bytes;
    size_t count = 0;
  };
  // What to start once the lock is let go. Each is claimed under the lock
  // (reading_, writing_, running_, finished_), so no other thread finishes
  // the stream before it is started.
  struct Actions {
    bool run = false;  // `batch` to start (Start)
    std::deque<Entry> batch;
    bool write = false;  // writing_buffer_
    bool more = false;   // more answers queued after it
    bool read = false;
    bool finish = false;
    grpc::Status status;
  };

  // The requests of the message just read, each parsed, authorized and
  // admitted by the quotas, into `entries`; not OK when the message itself
  // is refused (the stream then ends with it).
  absl::Status TakeAll(std::vector<Entry>& entries);
  // One request of it.
  Entry Take(std::string_view bytes);
  // `response` serialized into a slice of its own (no copy through a
  // string).
  static Answers Serialize(const v1::ScheduleStreamResponse& response);
  // A batch run through the JobService's Async calls: its answers (one per
  // request not refused, in order) and how many are still to come.
  struct Running {
    std::deque<Entry> batch;
    std::vector<v1::StreamAnswer> answers;
    // Answers to come, plus one while the batch is being started.
    std::atomic<size_t> pending{1};
  };
  // Runs `batch`, then each batch claimed when one ends. With inline
  // writes (--sync=none), on this thread while its requests need not wait
  // (StartHere); otherwise on a worker (RunBatch).
  void Start(std::deque<Entry> batch);
  // Batches on a worker, each through JobService::Stream (one synced
  // write for a run of Schedules): `batch`, then each batch claimed when
  // one ends.
  void RunBatch(std::deque<Entry> batch);
  // Starts each request of `batch` through the Async calls (on the
  // polling thread their writes are gathered, JobWriter::WriteGathered);
  // from the first that would have to wait, the rest run on a worker, in
  // order. What to start next when the whole batch was answered here;
  // nullopt when its last answer comes later, on another thread (Arrive).
  std::optional<Actions> StartHere(std::deque<Entry> batch);
  // One request of `running`, its answer at `k`: false when it would
  // have to wait (nothing done).
  bool StartOne(const std::shared_ptr<Running>& running,
                const v1::StreamRequest& request, size_t k);
  // An answer of `running` came: when the last, queues them all and starts
  // what follows.
  void Arrive(const std::shared_ptr<Running>& running);
  // Queues `answers`, those of batch's requests not refused, in order.
  Actions Queue(std::deque<Entry>& batch,
                std::vector<v1::StreamAnswer>& answers);
  Actions NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts what NextLocked claimed; after a Finish touches nothing.
  void Do(Actions actions);

  JobService* const jobs_;
  WorkerPool* const writes_;
  RpcMetrics* const metrics_;
  QuotaKeeper* const quotas_;
  const OnArrival* const on_arrival_;
  Caller caller_;  // set by Begin
  const size_t max_batch_;

  // Touched only by the read path (one read outstanding).
  grpc::ByteBuffer read_buffer_;
  std::string read_bytes_;  // read_buffer_ flattened
  std::vector<std::string_view> read_items_;
  // The answers being written, set under mu_ when a write is claimed; gRPC
  // reads it until OnWriteDone.
  grpc::ByteBuffer writing_buffer_;

  absl::Mutex mu_;
  // Read, not yet handed to a batch.
  std::deque<Entry> waiting_ ABSL_GUARDED_BY(mu_);
  // Requests read whose answers are not yet written, and the bytes of
  // those not yet answered: what bounds reading ahead.
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;
  size_t open_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Answers waiting for the write outstanding; how many it carries.
  std::deque<Answers> unwritten_ ABSL_GUARDED_BY(mu_);
  size_t writing_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool read_closed_ ABSL_GUARDED_BY(mu_) = false;  // half-closed, or failed
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a batch on a worker
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  // How the stream ends once everything read is answered: OK, or the
  // refusal of a message that stopped the reading.
  absl::Status end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_SCHEDULE_STREAM_REACTOR_H_
