// delayd: serves the DelayQueue API until SIGTERM or SIGINT, then drains and
// exits 0. SIGHUP re-reads the auth file (a bad one is logged and the
// current one kept). Exit 1: bad configuration or a failed start (the reason is
// on stderr). --help and --version print to stdout and exit 0. Once serving, it
// prints one line that tools and tests read:
//   delayd: listening grpc=HOST:PORT http=HOST:PORT
#include <pthread.h>
#include <signal.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/base/log.h"
#include "server/config.h"
#include "server/server.h"

int main(int argc, char** argv) {
  // Debian's Abseil checks lock order on every absl::Mutex acquisition
  // while others are held (a debug aid). When KeyLocks were striped mutexes
  // (a batch held up to 1000) it was the server's main cost (30% of the CPU
  // delivering 100,000 jobs). Tests keep it on; the server turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<delayd::server::Config> config =
      delayd::server::ParseConfig(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "delayd: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  // Block the stop signals in every thread (threads inherit the mask) so
  // that sigwait below is the only place they arrive.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::unique_ptr<delayd::server::Server>> server =
      delayd::server::Server::Start(*config);
  if (!server.ok()) {
    DELAYD_LOG_ERROR("delayd: cannot start: %s", server.status().ToString());
    return 1;
  }
  std::fprintf(stderr, "delayd: listening grpc=%s http=%s\n",
               (*server)->grpc_address().c_str(),
               (*server)->http_address().c_str());
  std::fflush(stderr);
  absl::StatusOr<delayd::server::JobService::RecoveryStats> recovered =
      (*server)->Recover();
  if (!recovered.ok()) {
    DELAYD_LOG_ERROR("delayd: recovery failed: %s",
                     recovered.status().ToString());
    (*server)->Shutdown();
    return 1;
  }
  DELAYD_LOG_INFO("delayd: recovered %d jobs (%d overdue) in %s; serving%s%s",
                  recovered->jobs, recovered->overdue,
                  absl::FormatDuration(recovered->duration),
                  recovered->in_flight == 0
                      ? ""
                      : absl::StrCat("; ", recovered->in_flight,
                                     " were out for delivery and go out again"),
                  recovered->recurring == 0
                      ? ""
                      : absl::StrCat("; ", recovered->recurring, " recurring (",
                                     recovered->recurring_moved,
                                     " moved by time zone rules)"));

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 &&
         signal_number == SIGHUP) {
    if (absl::Status reloaded = (*server)->ReloadAuth(); reloaded.ok()) {
      DELAYD_LOG_INFO("delayd: SIGHUP: auth file read again");
    } else {
      DELAYD_LOG_ERROR("delayd: SIGHUP: keeping the auth file in use: %s",
                       reloaded.ToString());
    }
  }
  DELAYD_LOG_INFO("delayd: %s received, draining",
                  signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  DELAYD_LOG_INFO("delayd: stopped");
  return 0;
}
