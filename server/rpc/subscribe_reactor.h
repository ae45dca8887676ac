// SubscribeReactor: one Subscribe stream on gRPC's callback API. It
// registers the subscriber with the Deliverer and writes the deliveries the
// Deliverer hands its sink, keeping exactly one write outstanding: the next
// one is chained from OnWriteDone, and takes every delivery queued meanwhile
// that fits one message (max_batch, 1 MiB). The queue plus the message being
// written never hold more than the subscriber's max_in_flight (the
// Deliverer assigns no more while they do).
//
// The stream ends when the client cancels it, a write fails, or the server
// shuts down (Finish UNAVAILABLE "server is shutting down", via
// Deliverer::CloseAll). OnDone unsubscribes — the Deliverer then releases the
// unacked deliveries on its own thread — and deletes the reactor. Callbacks
// never block: they take a short mutex and do no I/O.
//
// Created by DelayQueueService::Subscribe; owns itself (deleted in OnDone).
#ifndef DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_
#define DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "grpcpp/support/server_callback.h"
#include "server/core/quota_keeper.h"
#include "server/delivery/deliverer.h"
#include "server/metrics/rpc_metrics.h"

namespace delayd::server {

class SubscribeReactor final
    : public grpc::ServerWriteReactor<v1::SubscribeResponse> {
 public:
  // Finishes at once with `refusal` when it is not OK (e.g. the server is not
  // serving), or with the Deliverer's refusal of `request`; otherwise
  // subscribes. `deliverer` and `metrics` must outlive the stream. `quota`
  // (the stream's place in its principal's subscriptions quota) is held
  // until the stream is done.
  SubscribeReactor(Deliverer* deliverer, RpcMetrics* metrics,
                   const v1::SubscribeRequest& request,
                   const absl::Status& refusal,
                   QuotaKeeper::Ticket quota = QuotaKeeper::Ticket());

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Stream;

  Deliverer* const deliverer_;
  RpcMetrics* const metrics_;
  const absl::Time start_;
  const std::shared_ptr<Stream> stream_;
  // 0: never registered. Atomic: a write may end (OnWriteDone) before the
  // constructor has stored it.
  std::atomic<uint64_t> subscriber_{0};
  QuotaKeeper::Ticket quota_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_SUBSCRIBE_REACTOR_H_
