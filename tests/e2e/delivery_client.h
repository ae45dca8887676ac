// TestSubscriber: one Subscribe stream to a real delayd, read on its own
// thread, recording every Delivery with its wall-clock receive time and the
// stream message it came in, and checking that none came before its job's due
// time. Optionally acks every delivery, in batches of up to 1000 tokens from a
// second thread, so that acking does not slow the reading. Plus blocking
// helpers for Ack, Nack, ExtendLease and Redrive. Thread-safe accessors; one
// test thread drives it.
#ifndef DELAYD_TESTS_E2E_DELIVERY_CLIENT_H_
#define DELAYD_TESTS_E2E_DELIVERY_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "tests/e2e/scheduling_client.h"

namespace delayd::testing {

struct Received {
  v1::Delivery delivery;
  absl::Time at;       // wall clock when the client read it
  size_t message = 0;  // index of the stream message it came in
};

class TestSubscriber {
 public:
  TestSubscriber(std::shared_ptr<grpc::Channel> channel,
                 const std::string& topic, uint32_t max_in_flight,
                 bool auto_ack = false, uint32_t max_batch = 0);
  TestSubscriber(const TestSubscriber&) = delete;
  TestSubscriber& operator=(const TestSubscriber&) = delete;
  // Cancels the stream and joins the reader.
  ~TestSubscriber();

  // Cancels the stream (the subscriber "dies") and waits for it to end.
  void Cancel();
  // Waits until `n` deliveries came (or the stream ended).
  bool WaitFor(size_t n, absl::Duration timeout = absl::Seconds(20));
  // Waits until the stream ended; its status.
  std::optional<grpc::Status> WaitEnd(absl::Duration timeout);

  // Stops reading the stream after the message being read (the client
  // "hangs"; HTTP/2 flow control then holds the server's writes), until
  // Resume.
  void Pause();
  void Resume();

  std::vector<Received> received();
  // The number of deliveries in each stream message, in order.
  std::vector<size_t> message_sizes();
  size_t count();
  Received at(size_t i);
  // Deliveries received before their job's fire_at (must stay 0).
  int early();

 private:
  void Read();
  void AckLoop();

  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  const bool auto_ack_;
  v1::SubscribeRequest request_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> message_sizes_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  int early_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> to_ack_ ABSL_GUARDED_BY(mu_);
  bool stop_acking_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
  std::thread acker_;
};

// Blocking calls with a 30 s deadline.
class DeliveryClient {
 public:
  explicit DeliveryClient(std::shared_ptr<grpc::Channel> channel);

  Reply<v1::AckResponse> Ack(const std::vector<std::string>& tokens);
  // The code of acking one token (the call's code when the call failed).
  grpc::StatusCode AckCode(const std::string& token);
  Reply<v1::NackResponse> Nack(const std::string& token,
                               std::optional<absl::Duration> retry_after,
                               const std::string& reason = "failed",
                               bool dead_letter = false);
  Reply<v1::ExtendLeaseResponse> ExtendLease(const std::string& token,
                                             absl::Duration extend_by);
  Reply<v1::RedriveResponse> Redrive(const std::string& topic,
                                     const std::string& prefix = "");

 private:
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
};

// A retry policy with the given attempts, lease and backoff.
v1::RetryPolicy RetryOf(uint32_t max_attempts, absl::Duration lease,
                        absl::Duration initial_backoff = absl::Seconds(1),
                        absl::Duration max_backoff = absl::Minutes(10),
                        double multiplier = 2);

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_E2E_DELIVERY_CLIENT_H_
