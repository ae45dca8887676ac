// SchedulingTest: the fixture of the scheduling end-to-end tests — a real
// delayd process on a temp dir and a SchedulingClient to it, restartable on
// the same dir. Not thread-safe; one per test.
#ifndef DELAYD_TESTS_E2E_SCHEDULING_FIXTURE_H_
#define DELAYD_TESTS_E2E_SCHEDULING_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "delayd/v1/delayd.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/scheduling_client.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {

inline std::vector<std::string> IdsOf(const std::vector<v1::Job>& jobs) {
  std::vector<std::string> ids;
  for (const v1::Job& job : jobs) ids.push_back(job.id());
  return ids;
}

class SchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  // Starts a server on `dir` (a new temp dir when empty).
  void StartServer(const std::string& dir = "") {
    ASSERT_OK_AND_ASSIGN(server_, DelaydProcess::Start({}, dir));
    client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
  }

  // The ids of every job of `topic` starting with `prefix`, in order.
  std::vector<std::string> ListIds(const std::string& topic,
                                   const std::string& prefix = "") {
    v1::ListJobsRequest query;
    query.set_topic(topic);
    query.set_id_prefix(prefix);
    return IdsOf(client_->ListAll(query));
  }

  // Waits until the topic's ready count (which follows the timer firing)
  // is `ready`.
  void WaitReady(const std::string& topic, uint64_t ready) {
    EXPECT_TRUE(Eventually([&] {
      return client_->StatsOf(topic).ready() == ready;
    })) << client_->StatsOf(topic).DebugString();
  }

  std::unique_ptr<DelaydProcess> server_;
  std::unique_ptr<SchedulingClient> client_;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_E2E_SCHEDULING_FIXTURE_H_
