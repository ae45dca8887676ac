// DeliveryTest: the fixture of the delivery end-to-end tests — the
// scheduling fixture (a real delayd on a temp dir) plus subscribers made
// through it, every one of which is checked at the end for deliveries that
// came before their due time. Not thread-safe; one per test.
#ifndef DELAYD_TESTS_E2E_DELIVERY_FIXTURE_H_
#define DELAYD_TESTS_E2E_DELIVERY_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/delivery_client.h"
#include "tests/e2e/scheduling_fixture.h"

namespace delayd::testing {

class DeliveryTest : public SchedulingTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(SchedulingTest::SetUp());
    delivery_ = std::make_unique<DeliveryClient>(server_->NewChannel());
  }

  void TearDown() override {
    for (const auto& sub : subscribers_) {
      EXPECT_EQ(sub->early(), 0) << "a delivery came before its due time";
    }
    subscribers_.clear();
  }

  TestSubscriber& Subscribe(const std::string& topic,
                            uint32_t max_in_flight = 100,
                            bool auto_ack = false) {
    subscribers_.push_back(std::make_unique<TestSubscriber>(
        server_->NewChannel(), topic, max_in_flight, auto_ack));
    return *subscribers_.back();
  }

  // Stops the server with `signal` and starts it again on the same data.
  void Restart(int signal) {
    for (const auto& sub : subscribers_) sub->Cancel();
    server_->KeepDir();
    const std::string dir = server_->dir();
    server_->Signal(signal);
    ASSERT_OK(server_->Wait());
    server_.reset();
    ASSERT_NO_FATAL_FAILURE(StartServer(dir));
    delivery_ = std::make_unique<DeliveryClient>(server_->NewChannel());
  }

  void MustSchedule(const v1::JobSpec& spec) {
    auto reply = client_->Schedule(Request(spec));
    ASSERT_RPC_OK(reply);
  }

  std::unique_ptr<DeliveryClient> delivery_;
  std::vector<std::unique_ptr<TestSubscriber>> subscribers_;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_E2E_DELIVERY_FIXTURE_H_
