// delayctl's executable: wires the standard streams and SIGINT/SIGTERM to
// delayd::delayctl::Run (tools/delayctl/delayctl.h).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <string>
#include <vector>

#include "tools/delayctl/delayctl.h"

namespace {

std::atomic<bool> stop_requested{false};

void OnSignal(int) { stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A closed pipe (`delayctl list | head`) ends output, not the process.
  signal(SIGPIPE, SIG_IGN);
  std::ios::sync_with_stdio(false);

  std::vector<std::string> args(argv + 1, argv + argc);
  delayd::delayctl::Io io{&std::cin, &std::cout, &std::cerr, &stop_requested};
  return delayd::delayctl::Run(args, io);
}
