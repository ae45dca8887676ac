// Runs the real delayctl binary as a child process for tests: its stdout and
// stderr captured to files, stdin fed from a string, the exit code returned.
// Not thread-safe; one test thread drives it.
#ifndef DELAYD_TESTS_CLIENT_DELAYCTL_CLI_PROCESS_H_
#define DELAYD_TESTS_CLIENT_DELAYCTL_CLI_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace delayd::testing {

// Path of the delayctl binary under test (baked in at build time).
std::string DelayctlBinary();

struct CliResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
};

// A delayctl started in the background (for `subscribe`).
class CliProcess {
 public:
  // Starts `delayctl args...` with `stdin_data` on its stdin and the
  // variables of `env` ("NAME=value") added to a copy of the environment
  // without any DELAYD_* variable.
  CliProcess(const std::vector<std::string>& args,
             const std::string& stdin_data = "",
             const std::vector<std::string>& env = {});
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess();

  // What it wrote to stdout so far.
  std::string Out() const;
  void Signal(int signal);
  // Waits up to `timeout` for exit; on timeout kills it (exit_code -1).
  CliResult Wait(absl::Duration timeout = absl::Seconds(60));

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string dir_;
};

// Runs delayctl to completion.
CliResult RunCli(const std::vector<std::string>& args,
                 const std::string& stdin_data = "",
                 const std::vector<std::string>& env = {});

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_CLIENT_DELAYCTL_CLI_PROCESS_H_
