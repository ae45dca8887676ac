// DelayQueueService: the gRPC handlers of delayd.v1.DelayQueue, on gRPC's
// callback API. Handlers translate between protos and the job logic and
// convert statuses in one place; they hold no logic of their own. An rpc not
// overridden here answers UNIMPLEMENTED (the generated base class's default).
//
// Thread-safe: gRPC calls the handlers from its own threads.
#ifndef DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_
#define DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_

#include "delayd/v1/delayd.grpc.pb.h"

namespace delayd::server {

class DelayQueueService final : public delayd::v1::DelayQueue::CallbackService {
 public:
  DelayQueueService() = default;
  DelayQueueService(const DelayQueueService&) = delete;
  DelayQueueService& operator=(const DelayQueueService&) = delete;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELAY_QUEUE_SERVICE_H_
