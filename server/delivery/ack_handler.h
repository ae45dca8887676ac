// AckHandler: the rpcs that end or extend a delivery — Ack, Nack and
// ExtendLease — checked against the lease the ack token names.
//
// A token is current while its lease is: same key, nonce and attempt. Ack
// of a current token finishes the job (deleted, or DONE under --retention)
// in one unsynced write for the whole request, without reading the records
// when retention is off (the lease names the stored record exactly). Nack
// ends the delivery through LeaseEndings (retry after retry_after or the
// backoff, or DEAD). ExtendLease moves the lease's deadline and timer. A
// stale token (lease ended, or from before a restart) is
// FAILED_PRECONDITION; a malformed one INVALID_ARGUMENT; nothing changes
// either way.
//
// Thread-safe; runs on the caller's thread.
#ifndef DELAYD_SERVER_DELIVERY_ACK_HANDLER_H_
#define DELAYD_SERVER_DELIVERY_ACK_HANDLER_H_

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/delivery_state.h"
#include "server/delivery/lease_endings.h"
#include "server/delivery/work_loop.h"

namespace delayd::server {

class AckHandler {
 public:
  // All must outlive it.
  AckHandler(const DeliveryDeps& deps, DeliveryState* state, WorkLoop* loop,
             LeaseEndings* endings)
      : d_(deps), state_(state), loop_(loop), endings_(endings) {}
  AckHandler(const AckHandler&) = delete;
  AckHandler& operator=(const AckHandler&) = delete;

  absl::StatusOr<v1::AckResponse> Ack(const v1::AckRequest& req);
  absl::StatusOr<v1::NackResponse> Nack(const v1::NackRequest& req);
  absl::StatusOr<v1::ExtendLeaseResponse> ExtendLease(
      const v1::ExtendLeaseRequest& req);

 private:
  const DeliveryDeps d_;
  DeliveryState* const state_;
  WorkLoop* const loop_;
  LeaseEndings* const endings_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_ACK_HANDLER_H_
