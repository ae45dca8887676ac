// delayctl's executable: wires the standard streams and SIGINT/SIGTERM to
// delayd::delayctl::Run (client/delayctl/delayctl.h).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <string>
#include <vector>

#include "client/delayctl/delayctl.h"

namespace {

std::atomic<bool> stop_requested{false};

void OnSignal(int) { stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // subscribe ends its stream and exits 0 on SIGINT/SIGTERM; every other
  // command is one bounded call, which the signal's default action ends.
  if (delayd::delayctl::StopsOnSignal(args)) {
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  }
  std::ios::sync_with_stdio(false);

  delayd::delayctl::Io io{&std::cin, &std::cout, &std::cerr, &stop_requested};
  return delayd::delayctl::Run(args, io);
}
