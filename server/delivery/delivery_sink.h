// DeliverySink: where the Deliverer puts the deliveries of one subscriber —
// in the server a Subscribe stream (SubscribeReactor), in tests a fake. The
// Deliverer never hands a sink more deliveries than the subscriber's credit
// (max_in_flight), so a sink's queue is bounded by it.
//
// Implementations are thread-safe and never block: Send and Close are called
// from the delivery thread and from shutdown, possibly after the stream has
// ended (then they do nothing; the Deliverer releases the leases itself).
#ifndef DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_
#define DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_

#include "absl/status/status.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::server {

class DeliverySink {
 public:
  virtual ~DeliverySink() = default;

  // Queues one delivery for the subscriber, in order.
  virtual void Send(v1::Delivery delivery) = 0;

  // Ends the stream with `status` (UNAVAILABLE when the server shuts down).
  // Deliveries queued but not yet written are dropped; their leases end with
  // the subscription.
  virtual void Close(const absl::Status& status) = 0;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_
