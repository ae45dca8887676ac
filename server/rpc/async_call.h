// The pieces of a call on gRPC's async (completion queue) API that
// DelayQueueService's calls share:
// - Tag: what an event on the completion queue stands for; the polling
//   thread calls Proceed with the event's `ok`.
// - MemberTag: a Tag that calls a member function of its owner.
// - AsyncStreamCall: a streaming call with the shape of a callback-API
//   reactor (StartRead, StartWrite, Finish; OnReadDone, OnWriteDone,
//   OnCancel, OnDone), so that a stream's logic reads as it would on the
//   callback API while the server polls one completion queue.
//
// Why the async API: every gRPC server model was measured answering a unary
// Schedule with nothing behind it (BENCHMARKS.md, "One unary Schedule under
// each gRPC server model"); one thread polling one completion queue cost the
// least CPU a call, 0.65x the callback API's, and a server must use one model
// only: a callback service beside it brings threads that poll the same
// connections and hand their events over.
#ifndef DELAYD_SERVER_RPC_ASYNC_CALL_H_
#define DELAYD_SERVER_RPC_ASYNC_CALL_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace delayd::server {

class Tag {
 public:
  // Called on the polling thread, once per operation started with this tag.
  virtual void Proceed(bool ok) = 0;

 protected:
  ~Tag() = default;
};

template <typename Owner>
class MemberTag final : public Tag {
 public:
  MemberTag(Owner* owner, void (Owner::*proceed)(bool))
      : owner_(owner), proceed_(proceed) {}
  void Proceed(bool ok) override { (owner_->*proceed_)(ok); }

 private:
  Owner* const owner_;
  void (Owner::*const proceed_)(bool);
};

// Calls that arrived and are not over: the server stops polling only once
// none is left, so that no thread starts an operation on a call after the
// completion queue is shut down.
class OpenCalls {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++open_;
  }
  void Remove() {
    absl::MutexLock lock(&mu_);
    --open_;
  }
  // False when some are still open after `timeout`.
  bool AwaitNone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](int* open) { return *open == 0; }, &open_),
        timeout);
  }
  int open() {
    absl::MutexLock lock(&mu_);
    return open_;
  }

 private:
  absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

// A streaming call. `Stream` is grpc::ServerAsyncWriter<Write> (server
// streaming; no StartRead) or grpc::ServerAsyncReaderWriter<Write, Read>.
//
// The subclass requests the call with context() and stream() and
// arrived_tag(), after NotifyWhenDone; Arrived(ok) is then called on the
// polling thread (ok false: the server shuts down, and the call never
// started; the subclass deletes itself). From then on it is a reactor:
// - one read and one write outstanding at most, started from any thread;
// - Finish once, with no write outstanding, from any thread; nothing is
//   started after it;
// - OnReadDone, OnWriteDone and OnCancel on the polling thread;
// - OnDone last, once the finish is sent, the call is done and every
//   operation has come back: the subclass may delete itself there.
// The call counts in `open` from its arrival until OnDone has returned.
template <typename Stream, typename Write, typename Read = void>
class AsyncStreamCall {
 public:
  AsyncStreamCall(const AsyncStreamCall&) = delete;
  AsyncStreamCall& operator=(const AsyncStreamCall&) = delete;

 protected:
  explicit AsyncStreamCall(OpenCalls* open) : open_(open), stream_(&context_) {}
  virtual ~AsyncStreamCall() = default;

  // Before the call is requested: the done notification (OnCancel, and
  // what OnDone waits for) comes only for a call that starts.
  void NotifyWhenDone() { context_.AsyncNotifyWhenDone(&done_tag_); }
  grpc::ServerContext* context() { return &context_; }
  Stream* stream() { return &stream_; }
  Tag* arrived_tag() { return &arrived_tag_; }

  template <typename R = Read>
  void StartRead(R* message) {
    pending_.fetch_add(1, std::memory_order_relaxed);
    stream_.Read(message, &read_tag_);
  }
  void StartWrite(const Write* message, grpc::WriteOptions options) {
    pending_.fetch_add(1, std::memory_order_relaxed);
    stream_.Write(*message, options, &write_tag_);
  }
  void Finish(const grpc::Status& status) {
    pending_.fetch_add(1, std::memory_order_relaxed);
    stream_.Finish(status, &finish_tag_);
  }

  virtual void Arrived(bool ok) = 0;
  virtual void OnReadDone(bool /*ok*/) {}
  virtual void OnWriteDone(bool /*ok*/) {}
  virtual void OnCancel() {}
  virtual void OnDone() = 0;

 private:
  void ArrivedDone(bool ok) {
    if (ok) open_->Add();
    Arrived(ok);
  }
  void ReadDone(bool ok) {
    OnReadDone(ok);
    Settle();
  }
  void WriteDone(bool ok) {
    OnWriteDone(ok);
    Settle();
  }
  void FinishDone(bool /*ok*/) {
    finished_ = true;
    Settle();
  }
  void Done(bool /*ok*/) {
    if (context_.IsCancelled()) OnCancel();
    Settle();
  }
  // One operation (or the done notification) came back.
  void Settle() {
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 && finished_) {
      OpenCalls* const open = open_;
      OnDone();  // may delete this
      open->Remove();
    }
  }

  OpenCalls* const open_;
  grpc::ServerContext context_;
  Stream stream_;
  // The done notification, plus each operation started and not back.
  std::atomic<int> pending_{1};
  bool finished_ = false;  // polling thread only
  MemberTag<AsyncStreamCall> arrived_tag_{this, &AsyncStreamCall::ArrivedDone};
  MemberTag<AsyncStreamCall> read_tag_{this, &AsyncStreamCall::ReadDone};
  MemberTag<AsyncStreamCall> write_tag_{this, &AsyncStreamCall::WriteDone};
  MemberTag<AsyncStreamCall> finish_tag_{this, &AsyncStreamCall::FinishDone};
  MemberTag<AsyncStreamCall> done_tag_{this, &AsyncStreamCall::Done};
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_ASYNC_CALL_H_
