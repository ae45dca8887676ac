// The two gRPC services delayd serves, with every method on the async API
// (async_call.h), requested by DelayQueueService:
// - RawDelayQueue: delayd.v1.DelayQueue. Its unary methods and
//   ScheduleStream are raw (bytes both ways; request_parser.h parses them so
//   that even a request protobuf itself refuses gets INVALID_ARGUMENT naming
//   the field); Subscribe is typed.
// - AsyncHealth: grpc.health.v1.Health, typed.
// No method is left on the sync or callback API: either would bring
// threads of their own that poll the same connections.
#ifndef DELAYD_SERVER_RPC_RAW_SERVICES_H_
#define DELAYD_SERVER_RPC_RAW_SERVICES_H_

#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/async_unary_call.h"
#include "grpcpp/support/byte_buffer.h"

namespace delayd::server {

class RawDelayQueue final : public v1::DelayQueue::Service {
 public:
  // Methods by their order in delayd.proto's service DelayQueue.
  static constexpr int kMethods = 17;
  static constexpr int kSubscribe = 7;
  static constexpr int kScheduleStream = 16;

  RawDelayQueue() {
    for (int i = 0; i < kMethods; ++i) {
      if (i == kSubscribe) {
        MarkMethodAsync(i);
      } else {
        MarkMethodRaw(i);
      }
    }
  }

  void RequestUnary(int index, grpc::ServerContext* context,
                    grpc::ByteBuffer* request,
                    grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* writer,
                    grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncUnary(index, context, request, writer, cq, cq, tag);
  }
  void RequestSubscribe(grpc::ServerContext* context,
                        v1::SubscribeRequest* request,
                        grpc::ServerAsyncWriter<v1::SubscribeResponse>* writer,
                        grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncServerStreaming(kSubscribe, context, request, writer, cq, cq,
                                tag);
  }
  void RequestScheduleStream(
      grpc::ServerContext* context,
      grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
      grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncBidiStreaming(kScheduleStream, context, stream, cq, cq, tag);
  }
};

using AsyncHealth = grpc::health::v1::Health::AsyncService;

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_RAW_SERVICES_H_
