#include "server/rpc/subscribe_reactor.h"

#include <deque>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/rpc/grpc_status.h"

namespace delayd::server {

// The sink the Deliverer writes to, shared with it: it may outlive the
// reactor, and then drops what it is sent. The reactor is touched only while
// a write is outstanding or before Finish, so never after OnDone.
class SubscribeReactor::Stream final : public DeliverySink {
 public:
  explicit Stream(SubscribeReactor* reactor) : reactor_(reactor) {}

  void Send(v1::Delivery delivery) override {
    const v1::Delivery* next;
    {
      absl::MutexLock lock(&mu_);
      if (finish_wanted_) return;
      queue_.push_back(std::move(delivery));
      if (writing_) return;  // chained from OnWriteDone
      writing_ = true;
      next = &queue_.front();
    }
    reactor_->StartWrite(next);
  }

  void Close(const absl::Status& status) override {
    Finish(ToGrpcStatus(status));
  }

  // Finishes now, or after the outstanding write. Only the first call
  // counts.
  void Finish(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finish_wanted_) return;
      finish_wanted_ = true;
      status_ = status;
      if (writing_) return;
    }
    reactor_->Finish(status);
  }

  void WriteDone(bool ok) {
    const v1::Delivery* next = nullptr;
    bool more = false;
    bool do_finish = false;
    grpc::Status finish;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok && !finish_wanted_) {
        finish_wanted_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED,
                               "the stream broke while writing");
      }
      if (finish_wanted_) {
        writing_ = false;
        queue_.clear();
        do_finish = true;
        finish = status_;
      } else if (!queue_.empty()) {
        next = &queue_.front();
        more = queue_.size() > 1;
      } else {
        writing_ = false;
      }
    }
    if (next != nullptr) {
      // More are queued: let gRPC coalesce this one with the next writes
      // (the last of a run goes without the hint, so nothing is held back).
      grpc::WriteOptions options;
      if (more) options.set_buffer_hint();
      reactor_->StartWrite(next, options);
    } else if (do_finish) {
      reactor_->Finish(finish);
    }
  }

  grpc::StatusCode code() {
    absl::MutexLock lock(&mu_);
    return status_.error_code();
  }

 private:
  SubscribeReactor* const reactor_;
  absl::Mutex mu_;
  // Written or waiting; the front is being written while writing_.
  std::deque<v1::Delivery> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_wanted_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

SubscribeReactor::SubscribeReactor(Deliverer* deliverer, RpcMetrics* metrics,
                                   const v1::SubscribeRequest& request,
                                   const absl::Status& refusal)
    : deliverer_(deliverer),
      metrics_(metrics),
      start_(absl::Now()),
      stream_(std::make_shared<Stream>(this)) {
  if (!refusal.ok()) {
    stream_->Close(refusal);
    return;
  }
  absl::StatusOr<uint64_t> id = deliverer_->Subscribe(request, stream_);
  if (!id.ok()) {
    stream_->Close(id.status());
    return;
  }
  subscriber_ = *id;
}

void SubscribeReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }

void SubscribeReactor::OnCancel() {
  stream_->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                               "the subscriber cancelled the stream"));
}

void SubscribeReactor::OnDone() {
  if (subscriber_ != 0) {
    deliverer_->Unsubscribe(subscriber_, "subscriber stream ended");
  }
  metrics_->Record("Subscribe", stream_->code(), absl::Now() - start_);
  delete this;
}

}  // namespace delayd::server
