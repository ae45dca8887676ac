// AckBatcher: collects ack tokens and sends them in few Ack rpcs — a batch
// goes when its oldest token has waited `flush_interval`, or as soon as
// `batch_size` are pending. One background thread sends; Add never blocks on
// the network.
//
// Thread-safe. Owns its thread; Stop (or the destructor) sends what is
// pending and joins it.
#ifndef DELAYD_CLIENT_ACK_BATCHER_H_
#define DELAYD_CLIENT_ACK_BATCHER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::client {

class AckBatcher {
 public:
  // Sends one batch (at most batch_size tokens): one Ack rpc.
  using SendFn = std::function<absl::StatusOr<std::vector<v1::AckResult>>(
      const std::vector<std::string>& tokens)>;
  // Told of every failed rpc or refused token.
  using ErrorFn = std::function<void(const absl::Status&)>;

  struct Stats {
    uint64_t rpcs = 0;      // batches sent
    uint64_t acked = 0;     // tokens acked OK
    uint64_t failures = 0;  // tokens refused or lost with a failed rpc
  };

  // REQUIRES: 1 <= batch_size <= 1000, flush_interval >= 0.
  AckBatcher(SendFn send, ErrorFn on_error, absl::Duration flush_interval,
             size_t batch_size);
  AckBatcher(const AckBatcher&) = delete;
  AckBatcher& operator=(const AckBatcher&) = delete;
  ~AckBatcher();

  void Add(std::string token);
  // Sends everything pending, then stops the thread. Later Adds are sent at
  // once, on the calling thread. Idempotent.
  void Stop();
  Stats stats() const;

 private:
  void Run();
  // Sends `tokens` in rpcs of at most batch_size_.
  void Send(std::vector<std::string> tokens);

  const SendFn send_;
  const ErrorFn on_error_;
  const absl::Duration flush_interval_;
  const size_t batch_size_;

  mutable absl::Mutex mu_;
  std::vector<std::string> pending_ ABSL_GUARDED_BY(mu_);
  absl::Time oldest_ ABSL_GUARDED_BY(mu_);  // when pending_[0] came
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // the thread has exited
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_ACK_BATCHER_H_
