// CommitQueue: group commit for single writes that are not to wait on the
// caller's thread. A caller (a unary Schedule on gRPC's polling thread)
// prepares its mutation under its key lock and submits it with a callback.
// One committer thread takes everything queued and writes it as one synced
// store batch (one WAL record, one fsync); each callback then gets its
// write's status and its mutation back. Calls that come while it syncs
// queue up and share the next fsync: a leader writes the pending batch and
// syncs once while the others wait, and no caller holds a thread while it
// waits.
//
// A batch fails as a whole (one WriteBatch), and a failure must not reach a
// write that would have succeeded alone: when a batch of several fails, each
// of its mutations is written again on its own and gets its own status.
//
// The callbacks run on a second thread, the finisher, in the order of
// submission, one after the other, while the committer writes the next
// batch: answering a batch (a gRPC reply is sent on the thread that
// finishes it) costs about as much CPU as writing it. They must not wait.
//
// Thread-safe. The destructor writes and answers what is queued, then joins.
#ifndef DELAYD_SERVER_CORE_COMMIT_QUEUE_H_
#define DELAYD_SERVER_CORE_COMMIT_QUEUE_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "storage/job_store.h"
#include "storage/mutation.h"

namespace delayd::server {

class CommitQueue {
 public:
  // Called once with the write's status and the mutation submitted.
  using Done = absl::AnyInvocable<void(absl::Status, storage::Mutation&&) &&>;

  // `store` must outlive the queue. Writes with `durability`.
  CommitQueue(storage::JobStore* store, storage::Durability durability);
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;
  ~CommitQueue();

  void Submit(storage::Mutation mutation, Done done);

  // Store writes made, and mutations written by them (tests, and the
  // metrics delayd_commit_{writes,jobs}_total).
  int64_t writes() const;
  int64_t written() const;

 private:
  struct Entry {
    storage::Mutation mutation;
    Done done;
    absl::Status status;  // of its write, once written
  };
  void CommitLoop();
  void FinishLoop();

  storage::JobStore* const store_;
  const storage::Durability durability_;
  mutable absl::Mutex mu_;
  std::vector<Entry> queued_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  // Written, to be answered by the finisher.
  absl::Mutex finish_mu_;
  std::vector<Entry> written_queue_ ABSL_GUARDED_BY(finish_mu_);
  bool finish_stopping_ ABSL_GUARDED_BY(finish_mu_) = false;
  // Last: started once the rest is set up.
  std::thread finisher_;
  std::thread committer_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_COMMIT_QUEUE_H_
