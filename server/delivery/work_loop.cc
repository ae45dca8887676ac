#include "server/delivery/work_loop.h"

#include <utility>

namespace delayd::server {

void WorkLoop::Start() { thread_ = std::thread(&WorkLoop::Loop, this); }

void WorkLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void WorkLoop::Run(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void WorkLoop::Kick(absl::string_view topic) {
  absl::MutexLock lock(&mu_);
  if (dirty_.emplace(topic).second) dirty_order_.emplace_back(topic);
}

bool WorkLoop::Idle() {
  absl::MutexLock lock(&mu_);
  return !busy_ && tasks_.empty() && dirty_order_.empty();
}

void WorkLoop::Loop() {
  while (true) {
    std::function<void()> task;
    std::string topic;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkLoop* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stop_ || !w->tasks_.empty() || !w->dirty_order_.empty();
          },
          this));
      if (stop_) return;
      busy_ = true;
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
      } else {
        topic = std::move(dirty_order_.front());
        dirty_order_.pop_front();
        dirty_.erase(topic);
      }
    }
    if (task) {
      task();
    } else {
      dispatch_(topic);
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace delayd::server
