// The sub-commands of delayd-bench; each reads its options from Args,
// prints one JSON line on stdout and returns the process exit code (0 when
// the run did what it was asked: every job scheduled / received / present).
#ifndef DELAYD_BENCH_DELAYD_BENCH_COMMANDS_H_
#define DELAYD_BENCH_DELAYD_BENCH_COMMANDS_H_

#include "bench/delayd-bench/args.h"

namespace delayd::bench {

int LoadCommand(Args& args);
// `library`: Client::Schedule from many threads (library_command.cc).
int LibraryCommand(Args& args);
// herd: the burst with other defaults (1M jobs, all due at one instant).
int BurstCommand(Args& args, bool herd);
int WaitReadyCommand(Args& args);

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_COMMANDS_H_
