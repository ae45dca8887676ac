// Dispatcher: one dispatch round of a topic, on the delivery thread — takes
// ready jobs off the topic's queue up to the subscribers' free credit
// (round-robin, SubscriberSet::Reserve), re-reads them under their key
// locks, writes each as IN_FLIGHT with its attempt counted and a new lease
// (one unsynced write for the round), then hands each Delivery to its
// subscriber's sink.
//
// Never early: a job whose stored due time is still ahead (moved later, or
// the wall clock stepped back since it fired) is re-armed, not sent. An
// IN_FLIGHT record without a lease (a delivery of an earlier process) is as
// good as READY. A failed store read or write puts the jobs back on the
// queue and backs off 100 ms (this is the delivery thread, not a gRPC
// callback).
//
// Thread-compatible: only the WorkLoop's thread calls Dispatch.
#ifndef DELAYD_SERVER_DELIVERY_DISPATCHER_H_
#define DELAYD_SERVER_DELIVERY_DISPATCHER_H_

#include <string>

#include "server/delivery/delivery_state.h"
#include "server/delivery/work_loop.h"

namespace delayd::server {

class Dispatcher {
 public:
  // Jobs taken off a ready queue per round: one store read and one write
  // each. Other topics and tasks get their turn between rounds.
  static constexpr size_t kChunk = 256;

  // All must outlive it.
  Dispatcher(const DeliveryDeps& deps, DeliveryState* state, WorkLoop* loop)
      : d_(deps), state_(state), loop_(loop) {}
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // One round of `topic`; kicks it again when more may be ready.
  void Dispatch(const std::string& topic);

 private:
  const DeliveryDeps d_;
  DeliveryState* const state_;
  WorkLoop* const loop_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DISPATCHER_H_
