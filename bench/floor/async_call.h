// Unary calls on gRPC's async (completion queue) server model, for the
// benchmark servers that measure it: floor_unary and async_schedule.
#ifndef DELAYD_BENCH_FLOOR_ASYNC_CALL_H_
#define DELAYD_BENCH_FLOOR_ASYNC_CALL_H_

#include <functional>

#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "grpcpp/support/status.h"

namespace delayd::floor {

// An event on a completion queue: the tag of each operation started.
class Event {
 public:
  virtual ~Event() = default;
  virtual void Proceed(bool ok) = 0;
};

// One unary call, from its request to its finish. When a call arrives it
// requests the next one on the same queue, answers with `*handle` on the
// polling thread, and deletes itself once the answer is sent. `service`
// and `handle` must outlive every call.
template <typename Service, typename Request, typename Response>
class AsyncCall final : public Event {
 public:
  using RequestMethod = void (Service::*)(
      grpc::ServerContext*, Request*,
      grpc::ServerAsyncResponseWriter<Response>*, grpc::CompletionQueue*,
      grpc::ServerCompletionQueue*, void*);
  using Handler = std::function<grpc::Status(const Request&, Response*)>;

  static void Start(Service* service, grpc::ServerCompletionQueue* cq,
                    RequestMethod method, const Handler* handle) {
    auto* call = new AsyncCall(service, cq, method, handle);
    (service->*method)(&call->context_, &call->request_, &call->writer_, cq, cq,
                       call);
  }

  void Proceed(bool ok) override {
    if (!ok || answered_) {  // shutting down, or the answer is sent
      delete this;
      return;
    }
    Start(service_, cq_, method_, handle_);
    const grpc::Status status = (*handle_)(request_, &response_);
    answered_ = true;
    if (status.ok()) {
      writer_.Finish(response_, status, this);
    } else {
      writer_.FinishWithError(status, this);
    }
  }

 private:
  AsyncCall(Service* service, grpc::ServerCompletionQueue* cq,
            RequestMethod method, const Handler* handle)
      : service_(service),
        cq_(cq),
        method_(method),
        handle_(handle),
        writer_(&context_) {}

  Service* const service_;
  grpc::ServerCompletionQueue* const cq_;
  const RequestMethod method_;
  const Handler* const handle_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_;
  bool answered_ = false;
};

// Runs the events of `cq` until it is shut down and drained.
inline void PollEvents(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Event*>(tag)->Proceed(ok);
}

}  // namespace delayd::floor

#endif  // DELAYD_BENCH_FLOOR_ASYNC_CALL_H_
