// Runs client/examples/order_and_heartbeat against a real delayd: the
// example checks its own outcome (orders A and C closed, B's timeout
// canceled, the device marked offline once, after its last heartbeat) and
// exits 0 only then.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace delayd::testing {
namespace {

// Runs the example against `server`; its exit status and output.
std::pair<int, std::string> RunExample(const std::string& server) {
  const std::string command =
      std::string(DELAYD_EXAMPLE_PATH) + " --server=" + server + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) {
    output.append(buf, n);
  }
  return {pclose(pipe), output};
}

TEST_F(ClientTest, OrderAndHeartbeatExampleRuns) {
  const auto [status, output] = RunExample(address_);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_NE(output.find("order B paid: timeout CANCEL_OUTCOME_CANCELED"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("device sensor-7 is offline"), std::string::npos)
      << output;
}

TEST_F(ClientTest, ExampleWithAWrongServerSaysSoAndFails) {
  StopServer(SIGKILL);
  const auto [status, output] = RunExample(address_);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_NE(output.find("order_and_heartbeat: server"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace delayd::testing
