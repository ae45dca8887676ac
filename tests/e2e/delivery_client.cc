#include "tests/e2e/delivery_client.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "tests/support/rpc_deadline.h"

namespace delayd::testing {

using Stub = v1::DelayQueue::Stub;

TestSubscriber::TestSubscriber(std::shared_ptr<grpc::Channel> channel,
                               const std::string& topic, uint32_t max_in_flight,
                               bool auto_ack, uint32_t max_batch)
    : stub_(v1::DelayQueue::NewStub(std::move(channel))), auto_ack_(auto_ack) {
  request_.set_topic(topic);
  request_.set_consumer("e2e");
  request_.set_max_in_flight(max_in_flight);
  request_.set_max_batch(max_batch);
  reader_ = std::thread([this] { Read(); });
  if (auto_ack_) acker_ = std::thread([this] { AckLoop(); });
}

TestSubscriber::~TestSubscriber() { Cancel(); }

void TestSubscriber::Cancel() {
  context_.TryCancel();
  Resume();  // a paused reader reads again, and finds the stream ended
  if (reader_.joinable()) reader_.join();
  {
    absl::MutexLock lock(&mu_);
    stop_acking_ = true;
  }
  if (acker_.joinable()) acker_.join();
}

void TestSubscriber::AckLoop() {
  while (true) {
    v1::AckRequest req;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TestSubscriber* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->stop_acking_ || !s->to_ack_.empty();
          },
          this));
      if (to_ack_.empty()) return;  // stopping
      const size_t n = std::min<size_t>(to_ack_.size(), 1000);
      for (size_t i = 0; i < n; ++i) req.add_ack_tokens(to_ack_[i]);
      to_ack_.erase(to_ack_.begin(), to_ack_.begin() + n);
    }
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    v1::AckResponse response;
    stub_->Ack(&context, req, &response);
  }
}

void TestSubscriber::Read() {
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader =
      stub_->Subscribe(&context_, request_);
  v1::SubscribeResponse message;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TestSubscriber* s)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return !s->paused_; },
          this));
    }
    if (!reader->Read(&message)) break;
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    const size_t index = message_sizes_.size();
    message_sizes_.push_back(message.deliveries_size());
    for (v1::Delivery& delivery : *message.mutable_deliveries()) {
      if (auto_ack_) to_ack_.push_back(delivery.ack_token());
      if (now < FromProto(delivery.job().fire_at())) ++early_;
      received_.push_back({std::move(delivery), now, index});
    }
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  end_ = status;
}

bool TestSubscriber::WaitFor(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Arg {
    TestSubscriber* s;
    size_t n;
  } arg{this, n};
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return a->s->received_.size() >= a->n ||
                                           a->s->end_.has_value();
                                  },
                                  &arg),
                              timeout) &&
         received_.size() >= n;
}

std::optional<grpc::Status> TestSubscriber::WaitEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](TestSubscriber* s)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->end_.has_value(); },
          this),
      timeout);
  return end_;
}

void TestSubscriber::Pause() {
  absl::MutexLock lock(&mu_);
  paused_ = true;
}

void TestSubscriber::Resume() {
  absl::MutexLock lock(&mu_);
  paused_ = false;
}

std::vector<size_t> TestSubscriber::message_sizes() {
  absl::MutexLock lock(&mu_);
  return message_sizes_;
}

std::vector<Received> TestSubscriber::received() {
  absl::MutexLock lock(&mu_);
  return received_;
}

size_t TestSubscriber::count() {
  absl::MutexLock lock(&mu_);
  return received_.size();
}

Received TestSubscriber::at(size_t i) {
  absl::MutexLock lock(&mu_);
  return received_.at(i);
}

int TestSubscriber::early() {
  absl::MutexLock lock(&mu_);
  return early_;
}

DeliveryClient::DeliveryClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::DelayQueue::NewStub(std::move(channel))) {}

Reply<v1::AckResponse> DeliveryClient::Ack(
    const std::vector<std::string>& tokens) {
  v1::AckRequest request;
  for (const std::string& t : tokens) request.add_ack_tokens(t);
  return UnaryCall(*stub_, &Stub::Ack, request);
}

grpc::StatusCode DeliveryClient::AckCode(const std::string& token) {
  Reply<v1::AckResponse> reply = Ack({token});
  if (!reply.ok()) return reply.status.error_code();
  if (reply.response.results_size() != 1) return grpc::StatusCode::INTERNAL;
  return static_cast<grpc::StatusCode>(reply.response.results(0).code());
}

Reply<v1::NackResponse> DeliveryClient::Nack(
    const std::string& token, std::optional<absl::Duration> retry_after,
    const std::string& reason, bool dead_letter) {
  v1::NackRequest request;
  request.set_ack_token(token);
  if (retry_after) *request.mutable_retry_after() = ToProto(*retry_after);
  request.set_reason(reason);
  request.set_dead_letter(dead_letter);
  return UnaryCall(*stub_, &Stub::Nack, request);
}

Reply<v1::ExtendLeaseResponse> DeliveryClient::ExtendLease(
    const std::string& token, absl::Duration extend_by) {
  v1::ExtendLeaseRequest request;
  request.set_ack_token(token);
  *request.mutable_extend_by() = ToProto(extend_by);
  return UnaryCall(*stub_, &Stub::ExtendLease, request);
}

Reply<v1::RedriveResponse> DeliveryClient::Redrive(const std::string& topic,
                                                   const std::string& prefix) {
  v1::RedriveRequest request;
  request.set_topic(topic);
  request.set_id_prefix(prefix);
  return UnaryCall(*stub_, &Stub::Redrive, request);
}

v1::RetryPolicy RetryOf(uint32_t max_attempts, absl::Duration lease,
                        absl::Duration initial_backoff,
                        absl::Duration max_backoff, double multiplier) {
  v1::RetryPolicy retry;
  retry.set_max_attempts(max_attempts);
  *retry.mutable_lease() = ToProto(lease);
  *retry.mutable_initial_backoff() = ToProto(initial_backoff);
  *retry.mutable_max_backoff() = ToProto(max_backoff);
  retry.set_backoff_multiplier(multiplier);
  return retry;
}

}  // namespace delayd::testing
