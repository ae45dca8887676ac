#include "client/schedule_pipe.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/support/sync_stream.h"

namespace delayd::client {

// One call's request, from Call to its answer.
//
// Its caller sleeps on the pending's own mutex, not on the pipe's: the
// reader wakes the callers of a message after letting the pipe's mutex go,
// and a caller woken by its answer returns without taking that mutex again.
// (Woken through the pipe's mutex, a caller had to take it again, likely
// still held by the reader or by a caller woken before it: a second sleep.)
struct SchedulePipe::Pending {
  // Why its caller was woken. kDone stays: a kWrite after it is dropped.
  enum Reason { kNone = 0, kWrite = 1, kDone = 2 };

  void Wake(Reason why) {
    absl::MutexLock lock(&wake_mu);
    wake = std::max(wake, why);
  }
  // Waits for a reason, or until `deadline` (kNone); takes a kWrite, so
  // that the next one wakes it again.
  Reason Await(absl::Time deadline) {
    absl::MutexLock lock(&wake_mu);
    wake_mu.AwaitWithDeadline(absl::Condition(this, &Pending::Woken), deadline);
    const Reason why = wake;
    if (why == kWrite) wake = kNone;
    return why;
  }
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(wake_mu) {
    return wake != kNone;
  }

  v1::StreamRequest request;
  absl::Time queued_at;
  // Set before `done`, under the pipe's mu_, by whoever ends the call; its
  // caller reads them once it saw `done` under mu_ or was woken with kDone.
  v1::StreamAnswer answer;
  grpc::Status status;  // not OK: failed with no answer
  bool queued = true;   // in queued_, not yet written (mu_)
  bool done = false;    // answer or status set (mu_)

  absl::Mutex wake_mu;
  Reason wake ABSL_GUARDED_BY(wake_mu) = kNone;
};

// One ScheduleStream and its reader thread.
struct SchedulePipe::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScheduleStreamRequest,
                                           v1::ScheduleStreamResponse>>
      rw;
  // Written, not yet answered, in order (guarded by the pipe's mu_, as are
  // broken, writing and finished).
  std::deque<std::shared_ptr<Pending>> sent;
  bool broken = false;    // no more writes: the reader saw its end
  bool writing = false;   // a Write is under way
  bool finished = false;  // the reader is done with the pipe
  absl::CondVar idle;     // signalled when writing ends
  std::thread reader;
};

SchedulePipe::SchedulePipe(grpc::Channel* channel, v1::DelayQueue::Stub* stub,
                           std::function<void(grpc::ClientContext*)> authorize,
                           Options options)
    : channel_(channel),
      stub_(stub),
      authorize_(std::move(authorize)),
      options_(options) {}

SchedulePipe::~SchedulePipe() {
  std::deque<std::shared_ptr<Stream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(retired_);
    if (stream_ != nullptr) streams.push_back(std::move(stream_));
  }
  // Each reader then ends (with no call in progress, nothing is waiting).
  for (const std::shared_ptr<Stream>& s : streams) s->context.TryCancel();
  for (const std::shared_ptr<Stream>& s : streams) s->reader.join();
}

grpc::Status SchedulePipe::Call(v1::StreamRequest request, absl::Time deadline,
                                v1::StreamAnswer* answer) {
  if (absl::Now() >= deadline) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "Deadline Exceeded");
  }
  auto p = std::make_shared<Pending>();
  p->request = std::move(request);
  mu_.Lock();
  p->queued_at = absl::Now();
  queued_.push_back(p);
  while (true) {
    if (p->done) {
      mu_.Unlock();
      break;
    }
    if (p->queued && !writing_) {
      writing_ = true;
      Write(p);
      continue;
    }
    mu_.Unlock();
    const Pending::Reason why = p->Await(deadline);
    if (why == Pending::kDone) break;
    mu_.Lock();
    if (why == Pending::kNone && !p->done) {  // the deadline passed
      if (p->queued) {
        // Never written: never applied.
        queued_.erase(std::find(queued_.begin(), queued_.end(), p));
        if (!writing_ && !queued_.empty()) {
          queued_.front()->Wake(Pending::kWrite);
        }
        mu_.Unlock();
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "Deadline Exceeded (before the request was sent)");
      }
      mu_.Unlock();
      // Written: its answer, when it comes, goes nowhere.
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "Deadline Exceeded");
    }
  }
  if (!p->status.ok()) return p->status;
  *answer = std::move(p->answer);
  return grpc::Status::OK;
}

void SchedulePipe::Write(const std::shared_ptr<Pending>& own) {
  while (!queued_.empty() && !own->done) {
    if (options_.linger > absl::ZeroDuration() &&
        queued_.size() < options_.max_batch) {
      mu_.AwaitWithDeadline(
          absl::Condition(
              +[](SchedulePipe* pipe) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return pipe->queued_.size() >= pipe->options_.max_batch;
              },
              this),
          queued_.front()->queued_at + options_.linger);
      if (queued_.empty()) break;
    } else {
      // Callers woken by the last answers are likely runnable but not yet
      // queued: give them the core first, so they share this message.
      mu_.Unlock();
      std::this_thread::yield();
      mu_.Lock();
      if (queued_.empty() || own->done) break;
    }
    std::shared_ptr<Stream> s = OpenLocked();
    const size_t n = std::min(queued_.size(), options_.max_batch);
    if (s == nullptr) {
      for (size_t i = 0; i < n; ++i) {
        std::shared_ptr<Pending> p = std::move(queued_.front());
        queued_.pop_front();
        p->queued = false;
        p->status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "not connected to the server");
        p->done = true;
        p->Wake(Pending::kDone);
      }
      continue;
    }
    v1::ScheduleStreamRequest message;
    for (size_t i = 0; i < n; ++i) {
      std::shared_ptr<Pending> p = std::move(queued_.front());
      queued_.pop_front();
      p->queued = false;
      *message.add_requests() = std::move(p->request);
      s->sent.push_back(std::move(p));
    }
    s->writing = true;
    mu_.Unlock();
    const bool ok = s->rw->Write(message);
    mu_.Lock();
    s->writing = false;
    s->idle.SignalAll();
    // Its reader sees the end too, and fails what it did not answer.
    if (!ok) s->broken = true;
  }
  writing_ = false;
  if (!queued_.empty()) queued_.front()->Wake(Pending::kWrite);  // next writer
}

std::shared_ptr<SchedulePipe::Stream> SchedulePipe::OpenLocked() {
  if (stream_ != nullptr && !stream_->broken) return stream_;
  if (channel_->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    return nullptr;
  }
  if (stream_ != nullptr) retired_.push_back(std::move(stream_));
  // Readers done with the pipe only return: joining them here is quick.
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->finished) {
      (*it)->reader.join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  auto s = std::make_shared<Stream>();
  authorize_(&s->context);
  // The headers leave with the first message: opening never blocks.
  s->context.set_initial_metadata_corked(true);
  s->rw = stub_->ScheduleStream(&s->context);
  s->reader = std::thread([this, s = s.get()] { Read(s); });
  stream_ = s;
  return s;
}

void SchedulePipe::Read(Stream* s) {
  v1::ScheduleStreamResponse message;
  bool extra = false;  // more answers than requests: the stream is unusable
  std::vector<std::shared_ptr<Pending>> answered;
  while (!extra && s->rw->Read(&message)) {
    {
      absl::MutexLock lock(&mu_);
      for (v1::StreamAnswer& a : *message.mutable_answers()) {
        if (s->sent.empty()) {
          extra = true;
          break;
        }
        std::shared_ptr<Pending> p = std::move(s->sent.front());
        s->sent.pop_front();
        p->answer = std::move(a);
        p->done = true;
        answered.push_back(std::move(p));
      }
    }
    for (const std::shared_ptr<Pending>& p : answered) {
      p->Wake(Pending::kDone);
    }
    answered.clear();
  }
  {
    absl::MutexLock lock(&mu_);
    s->broken = true;
  }
  if (extra) s->context.TryCancel();
  {
    // Finish only once no Write is under way (it fails soon on a stream
    // that has ended).
    absl::MutexLock lock(&mu_);
    while (s->writing) s->idle.Wait(&mu_);
  }
  grpc::Status status = s->rw->Finish();
  if (extra) {
    status = grpc::Status(grpc::StatusCode::INTERNAL,
                          "ScheduleStream: the server answered more requests "
                          "than were sent");
  } else if (status.ok()) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "ScheduleStream ended before every request was "
                          "answered");
  }
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<Pending>& p : s->sent) {
    p->status = status;
    p->done = true;
    p->Wake(Pending::kDone);
  }
  s->sent.clear();
  s->finished = true;
}

}  // namespace delayd::client
