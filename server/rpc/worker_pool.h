// WorkerPool: a fixed set of named threads running queued tasks in FIFO
// order. The handlers of gRPC calls must not block (one thread polls every
// call's events), so they hand the job logic, which can wait for a key
// lock, a RocksDB write stall or an fsync, to a pool and answer the call
// from it. Enough threads let concurrent writers share one fsync
// (group commit). Thread-safe; the destructor runs what is queued, then
// joins.
#ifndef DELAYD_SERVER_RPC_WORKER_POOL_H_
#define DELAYD_SERVER_RPC_WORKER_POOL_H_

#include <pthread.h>

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace delayd::server {

class WorkerPool {
 public:
  // `name` names the threads (for top, perf and debuggers); Linux keeps
  // its first 15 bytes.
  WorkerPool(int threads, const std::string& name) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { Loop(); });
      pthread_setname_np(threads_.back().native_handle(),
                         name.substr(0, 15).c_str());
    }
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  void Run(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || !p->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;  // stopping, and nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_WORKER_POOL_H_
