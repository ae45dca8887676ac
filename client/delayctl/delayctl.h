// delayctl: the command-line client of delayd, as a library. Run() is the
// whole program — main() only wires stdin/stdout/stderr and SIGINT to it —
// so that tests and other tools can call it too.
//
// Thread-compatible: one Run() per thread; `stop` may be set from anywhere
// (a signal handler) to end a running `subscribe`.
#ifndef DELAYD_CLIENT_DELAYCTL_DELAYCTL_H_
#define DELAYD_CLIENT_DELAYCTL_DELAYCTL_H_

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

namespace delayd::delayctl {

// Exit codes, also listed by `delayctl --help`.
enum ExitCode : int {
  kExitOk = 0,
  // The server refused the call or a job was not found (NOT_FOUND, a cancel
  // that found nothing, an ack token that was stale, health NOT_SERVING).
  kExitFailed = 1,
  // Bad command line: unknown command or flag, bad value, missing argument.
  kExitUsage = 2,
  // The server could not be reached within --timeout, or answered
  // UNAVAILABLE (shutting down, recovering, store unable to write).
  kExitUnavailable = 3,
};

struct Io {
  std::istream* in;
  std::ostream* out;
  std::ostream* err;
  // Set to end `subscribe` (SIGINT); may be null.
  const std::atomic<bool>* stop = nullptr;
};

// Runs one delayctl command line (`args` without the program name) and
// returns the exit code. Errors go to io.err as one line "delayctl: <what>".
int Run(const std::vector<std::string>& args, const Io& io);

// Whether `args` run a command that stops cleanly when io.stop is set
// (subscribe); for the others a SIGINT should simply end the process.
bool StopsOnSignal(const std::vector<std::string>& args);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_DELAYCTL_H_
