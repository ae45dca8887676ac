#include "tests/client/client_fixture.h"

#include <cstdlib>
#include <sstream>

#include "tests/support/poll.h"

namespace delayd::testing {

bool Eventually(const std::function<bool()>& condition,
                absl::Duration timeout) {
  return PollUntil(condition, timeout);
}

double MetricValue(const std::string& scrape, const std::string& series) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, series.size() + 1, series + " ") == 0) {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return -1;
}

void ClientTest::SetUp() {
  ASSERT_OK_AND_ASSIGN(server_, DelaydProcess::Start());
  address_ = server_->grpc_address();
  dir_ = server_->dir();
  client_ = std::make_unique<client::Client>(Options());
}

client::ClientOptions ClientTest::Options() const {
  client::ClientOptions options;
  options.target = address_;
  options.default_deadline = absl::Seconds(30);
  // The channel looks for the restarted server at least every 200 ms, and
  // gives up on a connection attempt that hangs after 1 s (one made while
  // the restarted server was coming up sometimes stalled for seconds).
  options.max_reconnect_backoff = absl::Milliseconds(200);
  options.connect_timeout = absl::Seconds(1);
  // Calls made just after a restart ride out the reconnection.
  options.retry.max_attempts = 30;
  options.retry.max_backoff = absl::Milliseconds(500);
  return options;
}

void ClientTest::StopServer(int signal) {
  server_->KeepDir();
  server_->Signal(signal);
  ASSERT_OK(server_->Wait());
  server_.reset();
}

void ClientTest::StartServerAgain() {
  // delayd takes the last --listen given: this one overrides the fixture's
  // port 0.
  ASSERT_OK_AND_ASSIGN(server_,
                       DelaydProcess::Start({"--listen=" + address_}, dir_));
  ASSERT_EQ(server_->grpc_address(), address_);
}

}  // namespace delayd::testing
