// ClientTest: the fixture of the client library's tests — a real delayd
// process on a temp dir and a delayd::client::Client to it, stoppable and
// restartable on the same data dir AND the same port (so that a Client or
// Subscriber made before the restart finds the new server), plus a scrape of
// the server's /metrics. Not thread-safe; one per test.
#ifndef DELAYD_TESTS_CLIENT_CLIENT_FIXTURE_H_
#define DELAYD_TESTS_CLIENT_CLIENT_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "delayd/client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition,
                absl::Duration timeout = absl::Seconds(20));

// The value of the sample `series` (e.g.
// `delayd_rpcs_total{method="Ack",code="OK"}`, labels in the order the
// server prints them) in a scrape, or -1 when absent.
double MetricValue(const std::string& scrape, const std::string& series);

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override;

  client::ClientOptions Options() const;
  // Stops the server with `signal` and waits for it to exit, keeping its
  // dir and remembering its gRPC address.
  void StopServer(int signal);
  // Starts the server again on the stopped one's data dir and port.
  void StartServerAgain();

  std::unique_ptr<DelaydProcess> server_;
  std::unique_ptr<client::Client> client_;
  std::string address_;  // host:port of the gRPC listener
  std::string dir_;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_CLIENT_CLIENT_FIXTURE_H_
