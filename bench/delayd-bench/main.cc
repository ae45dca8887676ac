// delayd-bench: the load generator of BENCHMARKS.md, "Side by side with the
// peers". It runs the workloads of the peers' harness
// (../shared/peers/src/dqbench.cpp) against delayd over gRPC; bench/compare.sh
// orchestrates it. Every sub-command prints one JSON object on one line.
//
//   delayd-bench load      --target H:P [--jobs 1000000] [--conns 8]
//                          [--batch 1|100] [--max-seconds S] [--topic T]
//                          [--recurring-interval-ms N] (recurring jobs)
//   delayd-bench burst     --target H:P [--jobs 200000] [--subscribers 4]
//                          [--background N] [--lead-ms 10000] [--window-ms
//                          2000] [--lateness-out FILE] (each job received:
//                          "receive_ms lateness_ms")
//   delayd-bench herd      --target H:P [--jobs 1000000] (all due at once)
//   delayd-bench waitready --target H:P --expect N [--timeout 300]
// Every sub-command also takes --token TOKEN (default $DELAYD_TOKEN) and,
// for TLS, --tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-server-name N].
#include <cstdio>
#include <string>

#include "absl/synchronization/mutex.h"
#include "bench/delayd-bench/args.h"
#include "bench/delayd-bench/commands.h"

namespace {

void Usage() {
  std::fprintf(
      stderr,
      "usage: delayd-bench load|burst|herd|waitready|library --target "
      "HOST:PORT "
      "[--name value ...]\n"
      "  load      [--topic bench] [--jobs 1000000] [--conns 8] [--batch 1]\n"
      "            [--max-seconds 0] [--min-delay-ms 60000] "
      "[--max-delay-ms 3600000]\n"
      "            [--recurring-interval-ms 0]\n"
      "  burst     [--topic burst] [--jobs 200000] [--producers 8] "
      "[--batch 1]\n"
      "            [--subscribers 4] [--max-in-flight 1000] [--max-batch 0]\n"
      "            [--lead-ms 10000]"
      "\n"
      "            [--window-ms 2000] [--max-wait-seconds 120] "
      "[--background 0]\n"
      "            [--background-batch 1000] [--recurring-interval-ms 0]\n"
      "            [--lateness-out FILE]\n"
      "  herd      as burst, defaults --jobs 1000000 --batch 1000 --lead-ms "
      "30000 --window-ms 1\n"
      "  waitready --expect N [--topic ''] [--timeout 300]\n"
      "  library   [--threads 8] [--jobs 1000000] [--max-seconds 0] "
      "[--linger-us 0]\n"
      "            [--unary 0] [--topic bench] [--min-delay-ms 60000] "
      "[--max-delay-ms 3600000]\n"
      "every command: [--token TOKEN] (default $DELAYD_TOKEN), and for TLS\n"
      "  --tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-server-name "
      "NAME]\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage();
    return 2;
  }
  // Debian's Abseil checks lock order on every absl::Mutex acquisition (a
  // debug aid, 1-2% of this client's CPU inside gRPC); delayd turns it off
  // too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::string command = argv[1];
  delayd::bench::Args args(argc, argv, 2);
  if (command == "load") return delayd::bench::LoadCommand(args);
  if (command == "library") return delayd::bench::LibraryCommand(args);
  if (command == "burst") return delayd::bench::BurstCommand(args, false);
  if (command == "herd") return delayd::bench::BurstCommand(args, true);
  if (command == "waitready") return delayd::bench::WaitReadyCommand(args);
  Usage();
  return 2;
}
