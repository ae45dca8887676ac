#include "client/ack_batcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace delayd::client {

AckBatcher::AckBatcher(SendFn send, ErrorFn on_error,
                       absl::Duration flush_interval, size_t batch_size)
    : send_(std::move(send)),
      on_error_(std::move(on_error)),
      flush_interval_(flush_interval),
      batch_size_(batch_size),
      thread_([this] { Run(); }) {}

AckBatcher::~AckBatcher() { Stop(); }

void AckBatcher::Add(std::string token) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      if (pending_.empty()) oldest_ = absl::Now();
      pending_.push_back(std::move(token));
      return;
    }
  }
  Send({std::move(token)});
}

void AckBatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  thread_.join();
}

AckBatcher::Stats AckBatcher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void AckBatcher::Run() {
  const auto token_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !pending_.empty();
  };
  const auto full_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || pending_.size() >= batch_size_;
  };
  absl::MutexLock lock(&mu_);
  while (true) {
    // Sleep until a batch is full, the oldest token is due, or Stop.
    while (!stopping_ && pending_.size() < batch_size_) {
      if (pending_.empty()) {
        mu_.Await(absl::Condition(&token_or_stop));
        continue;
      }
      const absl::Time due = oldest_ + flush_interval_;
      if (absl::Now() >= due) break;
      mu_.AwaitWithDeadline(absl::Condition(&full_or_stop), due);
    }
    if (pending_.empty() && stopping_) break;
    std::vector<std::string> batch = std::move(pending_);
    pending_.clear();
    mu_.Unlock();
    Send(std::move(batch));
    mu_.Lock();
  }
  stopped_ = true;
}

void AckBatcher::Send(std::vector<std::string> tokens) {
  for (size_t begin = 0; begin < tokens.size(); begin += batch_size_) {
    const size_t end = std::min(tokens.size(), begin + batch_size_);
    std::vector<std::string> batch(
        std::make_move_iterator(tokens.begin() + begin),
        std::make_move_iterator(tokens.begin() + end));
    absl::StatusOr<std::vector<v1::AckResult>> results = send_(batch);
    uint64_t acked = 0;
    uint64_t failures = 0;
    absl::Status first_error;
    if (!results.ok()) {
      failures = batch.size();
      first_error = absl::Status(
          results.status().code(),
          absl::StrCat("Ack of ", batch.size(),
                       " tokens failed: ", results.status().message()));
    } else {
      for (const v1::AckResult& r : *results) {
        if (r.code() == 0) {
          ++acked;
          continue;
        }
        ++failures;
        if (first_error.ok()) {
          first_error =
              absl::Status(static_cast<absl::StatusCode>(r.code()),
                           absl::StrCat("Ack refused: ", r.message()));
        }
      }
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.rpcs;
      stats_.acked += acked;
      stats_.failures += failures;
    }
    if (!first_error.ok() && on_error_) on_error_(first_error);
  }
}

}  // namespace delayd::client
