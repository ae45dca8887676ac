// WorkLoop: the delivery thread. It runs queued tasks (lease expiries,
// stream-end releases, leftover cleanups: their store I/O) first, then one
// dispatch round per dirty topic in turn, so that no topic and no task
// waits behind a long backlog of another. Kick marks a topic dirty (jobs
// became ready, or credit freed); a topic is queued once however often it
// is kicked before its round.
//
// Thread-safe. Its lock is a leaf: Run and Kick may be called with any lock
// held.
#ifndef DELAYD_SERVER_DELIVERY_WORK_LOOP_H_
#define DELAYD_SERVER_DELIVERY_WORK_LOOP_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace delayd::server {

class WorkLoop {
 public:
  // `dispatch` runs one dispatch round of a topic, on the thread.
  explicit WorkLoop(std::function<void(const std::string&)> dispatch)
      : dispatch_(std::move(dispatch)) {}
  WorkLoop(const WorkLoop&) = delete;
  WorkLoop& operator=(const WorkLoop&) = delete;
  ~WorkLoop() { Stop(); }

  // Starts the thread. Work queued before waits for it.
  void Start();
  // Stops and joins the thread; work still queued is dropped. Idempotent.
  void Stop();

  // Queues a task.
  void Run(std::function<void()> task);
  // Queues a dispatch round of `topic`, unless one is queued already.
  void Kick(absl::string_view topic);

  // True when nothing is queued and the thread is not working.
  bool Idle();

 private:
  void Loop();

  const std::function<void(const std::string&)> dispatch_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> dirty_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_WORK_LOOP_H_
