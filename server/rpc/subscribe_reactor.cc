#include "server/rpc/subscribe_reactor.h"

#include <atomic>
#include <cstddef>
#include <deque>
#include <limits>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/rpc/grpc_status.h"

namespace delayd::server {

namespace {

// A stream message holds at most this much: well under gRPC's default 4 MiB
// receive limit. A single larger delivery goes alone.
constexpr size_t kMaxMessageBytes = size_t{1} << 20;

}  // namespace

// The sink the Deliverer writes to, shared with it: it may outlive the
// reactor, and then drops what it is sent. The reactor is touched only while
// a write is outstanding or before Finish, so never after OnDone. Writes are
// started from the Deliverer's thread and chained from OnWriteDone on the
// polling thread.
//
// Deliveries wait in a queue; each write takes as many of them as one
// message may hold (max_batch, kMaxMessageBytes) into `message_`, and the
// next write is chained from OnWriteDone. A message never waits to fill.
class SubscribeReactor::Stream final : public DeliverySink {
 public:
  Stream(SubscribeReactor* reactor, uint32_t max_batch)
      : reactor_(reactor),
        max_batch_(max_batch == 0 ? std::numeric_limits<size_t>::max()
                                  : max_batch) {}

  void Send(std::vector<v1::Delivery> deliveries) override {
    {
      absl::MutexLock lock(&mu_);
      if (finish_wanted_) return;
      for (v1::Delivery& d : deliveries) queue_.push_back(std::move(d));
      unwritten_.fetch_add(deliveries.size(), std::memory_order_relaxed);
      if (writing_) return;  // chained from OnWriteDone
      writing_ = true;
      FillMessageLocked();
    }
    StartWrite(/*chained=*/false);
  }

  size_t Unwritten() const override {
    return unwritten_.load(std::memory_order_relaxed);
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
      DropLocked();
    }
    reactor_->Finish(status);
  }

  void WriteDone(bool ok) {
    bool next = false;
    bool do_finish = false;
    grpc::Status finish;
    {
      absl::MutexLock lock(&mu_);
      unwritten_.fetch_sub(static_cast<size_t>(message_.deliveries_size()),
                           std::memory_order_relaxed);
      message_.Clear();
      if (!ok && !finish_wanted_) {
        finish_wanted_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED,
                               "the stream broke while writing");
      }
      if (finish_wanted_) {
        writing_ = false;
        DropLocked();
        do_finish = true;
        finish = status_;
      } else if (!queue_.empty()) {
        FillMessageLocked();
        next = true;
      } else {
        writing_ = false;
      }
    }
    if (next) {
      StartWrite(/*chained=*/true);
    } else if (do_finish) {
      reactor_->Finish(finish);
    }
  }

  grpc::StatusCode code() {
    absl::MutexLock lock(&mu_);
    return status_.error_code();
  }

 private:
  // Moves the queue's head into message_: at least one delivery, then more
  // while max_batch and kMaxMessageBytes allow.
  void FillMessageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t bytes = 0;
    while (!queue_.empty() &&
           static_cast<size_t>(message_.deliveries_size()) < max_batch_) {
      // Its share of the message: the delivery, its tag and length.
      const size_t size = queue_.front().ByteSizeLong() + 5;
      if (message_.deliveries_size() > 0 && bytes + size > kMaxMessageBytes) {
        break;
      }
      bytes += size;
      *message_.add_deliveries() = std::move(queue_.front());
      queue_.pop_front();
    }
    more_ = !queue_.empty();
  }

  // Outside mu_: message_ is not touched again until OnWriteDone.
  // `chained`: from OnWriteDone, not the write that starts a run.
  void StartWrite(bool chained) {
    // More are queued: let gRPC coalesce this message with the next (the
    // last of a run goes without the hint, so nothing is held back). Never
    // on the write that starts a run: with one, the floor server's streams
    // (bench/floor, --max-batch 1) delivered nothing at all.
    grpc::WriteOptions options;
    if (chained && more_) options.set_buffer_hint();
    reactor_->StartWrite(&message_, options);
  }

  // The stream is ending: what waits will never be written.
  void DropLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.clear();
    message_.Clear();
    unwritten_.store(0, std::memory_order_relaxed);
  }

  SubscribeReactor* const reactor_;
  const size_t max_batch_;
  std::atomic<size_t> unwritten_{0};  // queue_ plus message_ while writing_
  absl::Mutex mu_;
  std::deque<v1::Delivery> queue_ ABSL_GUARDED_BY(mu_);
  // Being written while writing_ (then only gRPC touches it).
  v1::SubscribeResponse message_;
  bool more_ = false;  // set with message_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_wanted_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

void SubscribeReactor::Request(RawDelayQueue* service,
                               grpc::ServerCompletionQueue* cq, OpenCalls* open,
                               Deliverer* deliverer, RpcMetrics* metrics,
                               const OnArrival* on_arrival) {
  auto* reactor = new SubscribeReactor(open, deliverer, metrics, on_arrival);
  reactor->NotifyWhenDone();
  service->RequestSubscribe(reactor->context(), &reactor->request_,
                            reactor->stream(), cq, reactor->arrived_tag());
}

SubscribeReactor::SubscribeReactor(OpenCalls* open, Deliverer* deliverer,
                                   RpcMetrics* metrics,
                                   const OnArrival* on_arrival)
    : AsyncStreamCall(open),
      deliverer_(deliverer),
      metrics_(metrics),
      on_arrival_(on_arrival) {}

void SubscribeReactor::Arrived(bool ok) {
  if (!ok) {  // the server shuts down: no call came
    delete this;
    return;
  }
  start_ = absl::Now();
  stream_ = std::make_shared<Stream>(this, request_.max_batch());
  (*on_arrival_)(*this);
}

void SubscribeReactor::Begin(const absl::Status& refusal,
                             QuotaKeeper::Ticket quota) {
  quota_ = std::move(quota);
  if (!refusal.ok()) {
    stream_->Close(refusal);
    return;
  }
  absl::StatusOr<uint64_t> id = deliverer_->Subscribe(request_, stream_);
  if (!id.ok()) {
    stream_->Close(id.status());
    return;
  }
  subscriber_.store(*id, std::memory_order_release);
}

void SubscribeReactor::OnWriteDone(bool ok) {
  stream_->WriteDone(ok);
  // Its room grew by what was written: jobs that became ready meanwhile
  // may go to it now.
  if (const uint64_t id = subscriber_.load(std::memory_order_acquire);
      ok && id != 0) {
    deliverer_->Written(id);
  }
}

void SubscribeReactor::OnCancel() {
  stream_->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                               "the subscriber cancelled the stream"));
}

void SubscribeReactor::OnDone() {
  if (const uint64_t id = subscriber_.load(std::memory_order_acquire);
      id != 0) {
    deliverer_->Unsubscribe(id, "subscriber stream ended");
  }
  metrics_->Record("Subscribe", stream_->code(), absl::Now() - start_);
  delete this;
}

}  // namespace delayd::server
