// The fixture of the Deliverer tests: the JobService fixture (in-memory
// store, FakeClock) plus fake subscribers — FakeSinks that record what they
// are sent and check, on every delivery, that it is not early by the fake
// clock. Tests wait for deliveries with a short real-time deadline and, to
// check that nothing more happens, for the service's threads to go idle.
#ifndef DELAYD_TESTS_SERVER_DELIVERER_TEST_UTIL_H_
#define DELAYD_TESTS_SERVER_DELIVERER_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/delivery/ack_token.h"
#include "server/delivery/delivery_sink.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {

// The decoder's bound on a token under the default limits.
inline const size_t kMaxTokenChars =
    MaxAckTokenChars(Limits().max_topic_bytes, Limits().max_id_bytes);

// A retry policy: max_attempts, the lease, and the backoff.
inline v1::RetryPolicy Retry(uint32_t max_attempts, int64_t lease_ms,
                             int64_t initial_ms = 1000,
                             int64_t max_ms = 600'000, double multiplier = 2) {
  v1::RetryPolicy retry;
  retry.set_max_attempts(max_attempts);
  *retry.mutable_lease() = DurationMs(lease_ms);
  *retry.mutable_initial_backoff() = DurationMs(initial_ms);
  *retry.mutable_max_backoff() = DurationMs(max_ms);
  retry.set_backoff_multiplier(multiplier);
  return retry;
}

class FakeSink final : public DeliverySink {
 public:
  explicit FakeSink(const timer::Clock* clock) : clock_(clock) {}

  void Send(std::vector<v1::Delivery> deliveries) override {
    absl::MutexLock lock(&mu_);
    sends_.push_back(deliveries.size());
    if (stalled_) {
      for (v1::Delivery& d : deliveries) held_.push_back(std::move(d));
      return;
    }
    for (v1::Delivery& d : deliveries) Receive(std::move(d));
  }
  size_t Unwritten() const override {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  // While stalled, deliveries are held as unwritten (a client that does not
  // read); Unstall receives them.
  void Stall() {
    absl::MutexLock lock(&mu_);
    stalled_ = true;
  }
  // Then tells `on_written` (as a stream's OnWriteDone tells the Deliverer).
  void Unstall() {
    std::function<void()> written;
    {
      absl::MutexLock lock(&mu_);
      stalled_ = false;
      for (v1::Delivery& d : held_) Receive(std::move(d));
      held_.clear();
      written = on_written_;
    }
    if (written) written();
  }
  void OnWritten(std::function<void()> f) {
    absl::MutexLock lock(&mu_);
    on_written_ = std::move(f);
  }
  // The size of each Send, in order.
  std::vector<size_t> sends() {
    absl::MutexLock lock(&mu_);
    return sends_;
  }
  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    closed_ = status;
  }

  // Waits (real time, short deadline) until `n` deliveries have come.
  bool WaitFor(size_t n) {
    std::pair<FakeSink*, size_t> arg(this, n);
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](std::pair<FakeSink*, size_t>* a)
                                         ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                           return a->first->received_.size() >=
                                                  a->second;
                                         },
                                    &arg),
                                kWait);
  }
  std::vector<v1::Delivery> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  size_t count() {
    absl::MutexLock lock(&mu_);
    return received_.size();
  }
  v1::Delivery at(size_t i) {
    absl::MutexLock lock(&mu_);
    return received_.at(i);
  }
  int early() {
    absl::MutexLock lock(&mu_);
    return early_;
  }
  std::optional<absl::Status> closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  void Receive(v1::Delivery delivery) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (Ms(delivery.job().fire_at()) > clock_->NowMs()) ++early_;
    received_.push_back(std::move(delivery));
  }

  const timer::Clock* const clock_;
  mutable absl::Mutex mu_;
  std::vector<v1::Delivery> received_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Delivery> held_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> sends_ ABSL_GUARDED_BY(mu_);
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_written_ ABSL_GUARDED_BY(mu_);
  int early_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mu_);
};

class DelivererTest : public JobServiceTest {
 protected:
  struct Sub {
    uint64_t id = 0;
    std::shared_ptr<FakeSink> sink;
  };

  ~DelivererTest() override {
    for (const auto& sink : sinks_) {
      EXPECT_EQ(sink->early(), 0) << "a delivery came before its due time";
    }
  }

  Deliverer& deliverer() { return service().deliverer(); }

  Sub Subscribe(std::string_view topic, uint32_t max_in_flight = 0) {
    v1::SubscribeRequest req;
    req.set_topic(std::string(topic));
    req.set_consumer("test");
    req.set_max_in_flight(max_in_flight);
    Sub sub;
    sub.sink = std::make_shared<FakeSink>(&clock_);
    sinks_.push_back(sub.sink);
    absl::StatusOr<uint64_t> id = deliverer().Subscribe(req, sub.sink);
    EXPECT_OK(id);
    sub.id = id.value_or(0);
    sub.sink->OnWritten([this, id = sub.id] { deliverer().Written(id); });
    return sub;
  }

  // Schedules with a retry policy.
  v1::Job MustScheduleWith(std::string_view topic, std::string_view id,
                           int64_t delay_ms, const v1::RetryPolicy& retry) {
    v1::ScheduleRequest req = ScheduleReq(topic, id, delay_ms, "p");
    *req.mutable_job()->mutable_retry() = retry;
    absl::StatusOr<v1::ScheduleResponse> r = service().Schedule(req);
    EXPECT_OK(r);
    return r.ok() ? r->job() : v1::Job();
  }

  // The per-token codes of Ack(tokens).
  std::vector<absl::StatusCode> AckCodes(std::vector<std::string> tokens) {
    v1::AckRequest req;
    for (std::string& t : tokens) req.add_ack_tokens(std::move(t));
    absl::StatusOr<v1::AckResponse> r = service().Ack(req);
    EXPECT_OK(r);
    std::vector<absl::StatusCode> codes;
    if (!r.ok()) return codes;
    for (const v1::AckResult& result : r->results()) {
      codes.push_back(static_cast<absl::StatusCode>(result.code()));
    }
    return codes;
  }
  absl::StatusCode AckCode(const std::string& token) {
    std::vector<absl::StatusCode> codes = AckCodes({token});
    return codes.empty() ? absl::StatusCode::kUnknown : codes[0];
  }

  absl::StatusOr<v1::NackResponse> Nack(const std::string& token,
                                        std::optional<int64_t> retry_after_ms,
                                        std::string_view reason = "failed",
                                        bool dead_letter = false) {
    v1::NackRequest req;
    req.set_ack_token(token);
    if (retry_after_ms)
      *req.mutable_retry_after() = DurationMs(*retry_after_ms);
    req.set_reason(std::string(reason));
    req.set_dead_letter(dead_letter);
    return service().Nack(req);
  }

  // Waits until the timer thread has fired every timer due by the clock's
  // now and the fire and delivery threads are idle (twice in a row, some
  // milliseconds apart): whatever was to happen by now, a clock move's
  // lease expiries and fires included, has happened.
  void Quiesce() {
    const absl::Time deadline = absl::Now() + kWait;
    int idle = 0;
    while (idle < 2 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      idle = service().TimersSettledForTesting() && service().IdleForTesting()
                 ? idle + 1
                 : 0;
    }
    ASSERT_EQ(idle, 2) << "the service never went idle";
  }

  // Waits until the job is in `state` and, for DEAD, until the topic's
  // stats count a dead job (a state is written, then counted).
  bool WaitForState(std::string_view topic, std::string_view id,
                    v1::JobState state) {
    return PollUntil(
        [&] {
          absl::StatusOr<v1::Job> job = service().GetJob(GetReq(topic, id));
          if (!job.ok() || job->state() != state) return false;
          return state != v1::JOB_STATE_DEAD || Stats(topic).dead() > 0;
        },
        kWait);
  }

  v1::TopicStats Stats(std::string_view topic) {
    v1::GetStatsRequest req;
    req.set_topic(std::string(topic));
    absl::StatusOr<v1::GetStatsResponse> r = service().GetStats(req);
    EXPECT_OK(r);
    return r.ok() && r->topics_size() == 1 ? r->topics(0) : v1::TopicStats();
  }

  std::vector<std::shared_ptr<FakeSink>> sinks_;
};

}  // namespace delayd::server::testing

#endif  // DELAYD_TESTS_SERVER_DELIVERER_TEST_UTIL_H_
