#include "server/core/commit_queue.h"

#include <pthread.h>

#include <span>
#include <utility>

namespace delayd::server {

CommitQueue::CommitQueue(storage::JobStore* store,
                         storage::Durability durability)
    : store_(store),
      durability_(durability),
      finisher_([this] { FinishLoop(); }),
      committer_([this] { CommitLoop(); }) {
  pthread_setname_np(committer_.native_handle(), "delayd-commit");
  pthread_setname_np(finisher_.native_handle(), "delayd-finish");
}

CommitQueue::~CommitQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  committer_.join();
  {
    absl::MutexLock lock(&finish_mu_);
    finish_stopping_ = true;
  }
  finisher_.join();
}

void CommitQueue::Submit(storage::Mutation mutation, Done done) {
  absl::MutexLock lock(&mu_);
  queued_.push_back({std::move(mutation), std::move(done), absl::OkStatus()});
}

int64_t CommitQueue::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

int64_t CommitQueue::written() const {
  absl::MutexLock lock(&mu_);
  return written_;
}

void CommitQueue::CommitLoop() {
  std::vector<Entry> batch;
  std::vector<storage::Mutation> mutations;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CommitQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stopping_ || !q->queued_.empty();
          },
          this));
      if (queued_.empty()) return;  // stopping, and nothing left
      batch.swap(queued_);
    }
    mutations.clear();
    mutations.reserve(batch.size());
    for (Entry& e : batch) mutations.push_back(std::move(e.mutation));
    const absl::Status all = store_->Apply(mutations, durability_);
    int64_t writes = 1;
    for (Entry& e : batch) e.status = all;
    if (!all.ok() && batch.size() > 1) {
      // One bad or unlucky write must not fail the others: each alone.
      for (size_t i = 0; i < batch.size(); ++i) {
        batch[i].status =
            store_->Apply(std::span(&mutations[i], 1), durability_);
      }
      writes += static_cast<int64_t>(batch.size());
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].mutation = std::move(mutations[i]);
    }
    {
      absl::MutexLock lock(&mu_);
      writes_ += writes;
      written_ += static_cast<int64_t>(batch.size());
    }
    {
      absl::MutexLock lock(&finish_mu_);
      for (Entry& e : batch) written_queue_.push_back(std::move(e));
    }
    batch.clear();
  }
}

void CommitQueue::FinishLoop() {
  std::vector<Entry> batch;
  while (true) {
    {
      absl::MutexLock lock(&finish_mu_);
      finish_mu_.Await(absl::Condition(
          +[](CommitQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->finish_mu_) {
            return q->finish_stopping_ || !q->written_queue_.empty();
          },
          this));
      if (written_queue_.empty()) return;  // stopping, and nothing left
      batch.swap(written_queue_);
    }
    for (Entry& e : batch) {
      std::move(e.done)(std::move(e.status), std::move(e.mutation));
    }
    batch.clear();
  }
}

}  // namespace delayd::server
