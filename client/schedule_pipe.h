// SchedulePipe: how Client sends Schedule, Reschedule and Cancel — over one
// long-lived ScheduleStream (delayd.proto) instead of a unary call each.
//
// Callers on any number of threads each hand in one request and wait for
// its answer. Whoever finds no write under way becomes the writer: it
// takes every request queued, up to max_batch, into one stream message,
// writes it, and goes on while more have queued meanwhile (so requests
// that come while a message is on its way leave together in the next: no
// waiting to fill a batch). It hands the writing over to a waiting caller
// once its own answer has come. With `linger` set, the writer first waits
// up to that long after the first queued request for max_batch of them
// (Kafka's linger.ms). One reader thread per stream takes the answers in
// order and wakes their callers.
//
// The stream opens on the first call and stays open. When it breaks, every
// request sent on it and not answered fails with the stream's status
// (UNAVAILABLE when the server went away): it was applied, or not, as a
// whole, as after a unary call that failed the same way. The next call
// opens a new stream. A caller's deadline ends its wait with
// DEADLINE_EXCEEDED; a request not yet written by then is never sent. (The
// caller that is writing waits for its Write to return: on a connection
// that went silent without closing, that is once HTTP/2 flow control has
// room again or TCP gives up.)
//
// Thread-safe. Private to the client library.
#ifndef DELAYD_CLIENT_SCHEDULE_PIPE_H_
#define DELAYD_CLIENT_SCHEDULE_PIPE_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "delayd/v1/delayd.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace delayd::client {

class SchedulePipe {
 public:
  struct Options {
    // Requests per stream message, at most (the server takes 1000).
    size_t max_batch = 1000;
    // How long the writer waits for max_batch requests; zero: it sends
    // what is queued at once.
    absl::Duration linger = absl::ZeroDuration();
  };

  // `channel` (the stub's) and `stub` must outlive the pipe; `authorize`
  // adds the call metadata of a new stream.
  SchedulePipe(grpc::Channel* channel, v1::DelayQueue::Stub* stub,
               std::function<void(grpc::ClientContext*)> authorize,
               Options options);
  SchedulePipe(const SchedulePipe&) = delete;
  SchedulePipe& operator=(const SchedulePipe&) = delete;
  // Cancels the stream and joins its reader. REQUIRES: no Call in
  // progress (as for the Client that owns it).
  ~SchedulePipe();

  // Sends `request` and waits until its answer comes, the stream breaks
  // (its status, not OK) or `deadline` passes (DEADLINE_EXCEEDED). On OK,
  // `answer` holds the server's answer, whose own code may be an error. A
  // stream is opened only on a READY channel (a write on a connecting one
  // could outlast the deadline): else UNAVAILABLE, nothing sent.
  grpc::Status Call(v1::StreamRequest request, absl::Time deadline,
                    v1::StreamAnswer* answer);

 private:
  struct Pending;
  struct Stream;

  // The writer's loop: sends what is queued until the queue is empty or
  // its own request `own` is answered.
  void Write(const std::shared_ptr<Pending>& own)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The open stream, opened if there is none (or it broke); null when one
  // is needed and the channel is not READY.
  std::shared_ptr<Stream> OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream's reader thread.
  void Read(Stream* stream);

  grpc::Channel* const channel_;
  v1::DelayQueue::Stub* const stub_;
  const std::function<void(grpc::ClientContext*)> authorize_;
  const Options options_;

  absl::Mutex mu_;
  // Handed in, not yet written.
  std::deque<std::shared_ptr<Pending>> queued_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  // Streams that broke, whose reader threads are still to be joined.
  std::deque<std::shared_ptr<Stream>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_SCHEDULE_PIPE_H_
