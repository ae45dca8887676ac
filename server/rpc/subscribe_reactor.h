// SubscribeReactor: one Subscribe stream on the server's completion queue
// (async_call.h: a reactor's shape on gRPC's async API). It registers the
// subscriber with the Deliverer and writes the deliveries the Deliverer hands
// its sink, keeping exactly one write outstanding: the next one is chained from
// OnWriteDone, and takes every delivery queued meanwhile that fits one message
// (max_batch, 1 MiB). The queue plus the message being written never hold more
// than the subscriber's max_in_flight (the Deliverer assigns no more while they
// do).
//
// The stream ends when the client cancels it, a write fails, or the server
// shuts down (Finish UNAVAILABLE "server is shutting down", via
// Deliverer::CloseAll). OnDone unsubscribes — the Deliverer then releases the
// unacked deliveries on its own thread — and deletes the reactor. Callbacks
// never block: they take a short mutex and do no I/O.
//
// Created and requested by DelayQueueService before its call arrives; on
// arrival the service decides whether it may subscribe (Begin). Owns itself
// (deleted in OnDone, or on a call that never came).
#ifndef DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_
#define DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "grpcpp/support/async_stream.h"
#include "server/core/quota_keeper.h"
#include "server/delivery/deliverer.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rpc/async_call.h"
#include "server/rpc/raw_services.h"

namespace delayd::server {

class SubscribeReactor final
    : public AsyncStreamCall<grpc::ServerAsyncWriter<v1::SubscribeResponse>,
                             v1::SubscribeResponse> {
 public:
  // Requests one Subscribe call of `service` on `cq`. `on_arrival` is
  // called on the polling thread when it arrives, and calls Begin.
  // Everything borrowed must outlive the stream.
  using OnArrival = std::function<void(SubscribeReactor&)>;
  static void Request(RawDelayQueue* service, grpc::ServerCompletionQueue* cq,
                      OpenCalls* open, Deliverer* deliverer,
                      RpcMetrics* metrics, const OnArrival* on_arrival);

  const grpc::ServerContext& call_context() { return *context(); }
  const v1::SubscribeRequest& request() const { return request_; }

  // Finishes at once with `refusal` when it is not OK (e.g. the server is not
  // serving), or with the Deliverer's refusal of the request; otherwise
  // subscribes. `quota` (the stream's place in its principal's
  // subscriptions quota) is held until the stream is done.
  void Begin(const absl::Status& refusal,
             QuotaKeeper::Ticket quota = QuotaKeeper::Ticket());

 private:
  class Stream;

  SubscribeReactor(OpenCalls* open, Deliverer* deliverer, RpcMetrics* metrics,
                   const OnArrival* on_arrival);

  void Arrived(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  Deliverer* const deliverer_;
  RpcMetrics* const metrics_;
  const OnArrival* const on_arrival_;
  v1::SubscribeRequest request_;
  absl::Time start_;
  std::shared_ptr<Stream> stream_;
  // 0: never registered. Set by Begin and read by OnWriteDone and OnDone,
  // all on the polling thread; atomic so that it stays right if Begin ever
  // runs elsewhere.
  std::atomic<uint64_t> subscriber_{0};
  QuotaKeeper::Ticket quota_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_
