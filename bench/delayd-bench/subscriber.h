// Subscriber: one Subscribe stream of the lateness runs. A reader thread
// takes each Delivery, stamps it with the wall clock at once, records
// receive time - due time into the shared Tally (preallocated, indexed by
// job) and queues the ack token; an acker thread sends the queued tokens,
// up to 1000 per Ack call, so that acking never delays reading (after a
// call that carried fewer than 1000 it pauses 1 ms to let more gather).
// Every call carries the endpoint's token. Start with the constructor, end
// with Stop() (or the destructor).
#ifndef DELAYD_BENCH_DELAYD_BENCH_SUBSCRIBER_H_
#define DELAYD_BENCH_DELAYD_BENCH_SUBSCRIBER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/delayd-bench/endpoint.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace delayd::bench {

// What all subscribers of one run received. Sized before the run; each job
// index is written by the one reader that first receives it. Thread-safe.
struct Tally {
  Tally(int64_t jobs, size_t id_prefix_len, std::vector<int64_t> offsets);

  const size_t id_prefix_len;
  const std::vector<int64_t> offsets;  // LoadResult::offsets of the burst
  std::vector<double> lateness_ms;     // NaN until received
  std::vector<double> received_ms;     // wall clock of the receive, ms
  std::unique_ptr<std::atomic<uint8_t>[]> seen;
  std::atomic<int64_t> received{0};    // distinct jobs
  std::atomic<int64_t> duplicates{0};  // deliveries of a job seen before
  std::atomic<int64_t> early{0};       // received before the job's fire_at
  std::atomic<int64_t> foreign{0};     // not a job of this run
  // Recurring jobs: the occurrence counted is the one at due + this;
  // the others are acked and counted in other_occurrences only.
  int64_t occurrence_offset_ms = 0;
  std::atomic<int64_t> other_occurrences{0};
};

class Subscriber {
 public:
  // Opens its own channel (NewChannel(endpoint, channel_tag)).
  Subscriber(const Endpoint& endpoint, int channel_tag,
             const std::string& topic, const std::string& consumer,
             uint32_t max_in_flight, uint32_t max_batch, Tally* tally);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  ~Subscriber();

  // Waits (up to `timeout_ms`) until every queued token is acked, then
  // cancels the stream and joins both threads. Idempotent.
  void Stop(double timeout_ms);

  // Valid after Stop().
  double first_recv_ms() const { return first_recv_ms_; }
  double last_recv_ms() const { return last_recv_ms_; }
  int64_t deliveries() const { return deliveries_; }
  // Stream messages read (each carries one or more deliveries).
  int64_t messages() const { return messages_; }
  int64_t acked() const { return acked_; }
  int64_t ack_errors() const { return ack_errors_; }
  int64_t ack_calls() const { return ack_calls_; }
  // The stream's end: empty when it was still open at Stop().
  const std::string& stream_error() const { return stream_error_; }
  // True while the stream is open (false once the server ended it).
  bool open() const { return !ended_.load(); }

 private:
  void Read();
  void AckLoop();

  const Endpoint endpoint_;
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  v1::SubscribeRequest request_;
  Tally* const tally_;
  grpc::ClientContext context_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> cancelled_{false};

  // Reader thread only (read by others after it is joined).
  double first_recv_ms_ = 0;
  double last_recv_ms_ = 0;
  int64_t deliveries_ = 0;
  int64_t messages_ = 0;
  std::string stream_error_;

  // Acker thread only (read by others after it is joined).
  int64_t acked_ = 0;
  int64_t ack_errors_ = 0;
  int64_t ack_calls_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> to_ack_;  // guarded by mu_
  bool acking_ = false;              // guarded by mu_: a call is out
  bool stop_ = false;                // guarded by mu_

  std::thread reader_;
  std::thread acker_;
};

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_SUBSCRIBER_H_
