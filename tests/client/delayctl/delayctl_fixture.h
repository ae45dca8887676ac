// What the end-to-end tests of delayctl share: one real delayd per test
// suite, delayctl run against it, its --json output parsed back into the
// API's messages, and the check of a one-line error. Not thread-safe; one
// test thread drives it.
#ifndef DELAYD_TESTS_CLIENT_DELAYCTL_DELAYCTL_FIXTURE_H_
#define DELAYD_TESTS_CLIENT_DELAYCTL_DELAYCTL_FIXTURE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/client/delayctl/cli_process.h"
#include "tests/support/server_process.h"

namespace delayd::testing {

// `json` (one message of delayctl --json) as a Message; a parse failure
// fails the test.
template <typename Message>
Message FromJson(const std::string& json) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in: " << json;
  return message;
}

// Exactly one line, starting "delayctl: ".
inline void ExpectOneErrorLine(const CliResult& r) {
  EXPECT_TRUE(absl::StartsWith(r.err, "delayctl: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Starts delayd (port 0, a temp dir) before a suite's first test and stops
// it after its last; the suite's tests share it, so each uses its own
// topics.
class DelayctlServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = DelaydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // delayctl --server=<the test server> args...
  static CliResult Ctl(std::vector<std::string> args,
                       const std::string& stdin_data = "") {
    return RunCli(WithServer(std::move(args)), stdin_data);
  }
  static std::vector<std::string> WithServer(std::vector<std::string> args) {
    args.insert(args.begin(), "--server=" + server_->grpc_address());
    return args;
  }

  inline static DelaydProcess* server_ = nullptr;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_CLIENT_DELAYCTL_DELAYCTL_FIXTURE_H_
