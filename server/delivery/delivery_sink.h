// DeliverySink: where the Deliverer puts the deliveries of one subscriber —
// in the server a Subscribe stream (SubscribeReactor), in tests a fake.
//
// Bounded: the Deliverer hands a subscriber a new delivery only while both
// its leases and its unwritten deliveries are under its credit
// (max_in_flight), so a sink never holds more than that many unwritten,
// even when its client stops reading and the leases of what waits expire.
//
// Implementations are thread-safe and never block: Send and Close are called
// from the delivery thread and from shutdown, possibly after the stream has
// ended (then they do nothing; the Deliverer releases the leases itself).
#ifndef DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_
#define DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::server {

class DeliverySink {
 public:
  virtual ~DeliverySink() = default;

  // Queues deliveries for the subscriber, in order, to be written in as few
  // stream messages as its caps allow. Never waits to fill a message.
  virtual void Send(std::vector<v1::Delivery> deliveries) = 0;

  // Deliveries Send has been given that are not yet written to the stream
  // (0 once it ended). Read from any thread.
  virtual size_t Unwritten() const = 0;

  // Ends the stream with `status` (UNAVAILABLE when the server shuts down).
  // Deliveries queued but not yet written are dropped; their leases end with
  // the subscription.
  virtual void Close(const absl::Status& status) = 0;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DELIVERY_SINK_H_
