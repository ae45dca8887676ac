#ifndef DELAYD_SERVER_BASE_STAGE_CPU_H_
#define DELAYD_SERVER_BASE_STAGE_CPU_H_

// Where the server's CPU goes on the delivery path, stage by stage, for
// benchmarks (bench/stages/measure.sh). Built with -DDELAYD_STAGE_CPU=ON,
// the server adds each stage's thread CPU time to a process-wide total and
// prints the totals to stderr when it exits. Built without it (the
// default), every call here compiles to nothing.
//
// Thread CPU time, not wall time: a stage that waits (for a lock, for the
// disk) is charged only what it computes, not the time other threads and
// processes take meanwhile. On a VM whose speed drifts, the figures drift
// with it: compare the stages of one run. One clock read costs a system
// call, so stages are marked per batch (a fire chunk, a dispatch round, an
// Ack call), never per job.

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace delayd::server::stage_cpu {

#ifdef DELAYD_STAGE_CPU
inline constexpr bool kEnabled = true;
#else
inline constexpr bool kEnabled = false;
#endif

// A stage and its parts. A total (kFire, kDispatch, kAck) holds its parts
// and what lies between them.
enum class Stage {
  kFire,             // FirePath::FireMillisecond, all of it: the parts and
                     //   the scan of the millisecond's due index
  kFireTags,         //   the set of the fired timers' tags
  kFireLock,         //   a chunk's key hashes and locks
  kFireRescan,       //   a chunk's due-index range, read again under them
  kFireReady,        //   the chunk's jobs queued ready
  kDispatch,         // Dispatcher::Dispatch, all of it
  kDispatchPop,      //   credit reserved, ready ids popped
  kDispatchLock,     //   their key locks
  kDispatchRead,     //   their records (MultiGet)
  kDispatchPick,     //   which are deliverable, the records changed
  kDispatchMark,     //   the attempt marks written
  kDispatchLedger,   //   the ledger told
  kDispatchLease,    //   leases started, deliveries built
  kDispatchMetrics,  //   lateness observed
  kDispatchSend,     //   handed to the subscribers' streams
  kAck,              // AckHandler::Ack, all of it
  kAckDecode,        //   tokens decoded
  kAckLock,          //   their key locks
  kAckFind,          //   their leases looked up (and under --retention
                     //   their records read)
  kAckDelete,        //   the jobs deleted (one write)
  kAckEndLease,      //   the leases ended
  kAckLedger,        //   the ledger told
  kAckAnswer,        //   the kicks, the locks released, the answer
  kCount,
};

inline constexpr std::array<const char*, static_cast<size_t>(Stage::kCount)>
    kStageNames = {
        "fire",           "fire.tags",
        "fire.lock",      "fire.rescan",
        "fire.ready",     "dispatch",
        "dispatch.pop",   "dispatch.lock",
        "dispatch.read",  "dispatch.pick",
        "dispatch.mark",  "dispatch.ledger",
        "dispatch.lease", "dispatch.metrics",
        "dispatch.send",  "ack",
        "ack.decode",     "ack.lock",
        "ack.find",       "ack.delete",
        "ack.end_lease",  "ack.ledger",
        "ack.answer",
};
// A stage added without a name would print a null pointer.
static_assert(kStageNames.back() != nullptr);

// The calling thread's CPU time in nanoseconds.
inline int64_t ThreadCpuNs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

inline std::array<std::atomic<int64_t>, static_cast<size_t>(Stage::kCount)>
    totals_ns;

// Prints every stage's total, in seconds, one "stage-cpu NAME SECONDS" line
// each.
inline void PrintTotals() {
  for (size_t i = 0; i < totals_ns.size(); ++i) {
    std::fprintf(stderr, "stage-cpu %-16s %.3f\n", kStageNames[i],
                 static_cast<double>(totals_ns[i].load()) / 1e9);
  }
}

inline void Add(Stage stage, int64_t ns) {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(PrintTotals); });
  totals_ns[static_cast<size_t>(stage)].fetch_add(ns,
                                                  std::memory_order_relaxed);
}

// Charges its lifetime to a stage.
class Scope {
 public:
  explicit Scope(Stage stage) : stage_(stage) {
    if constexpr (kEnabled) start_ = ThreadCpuNs();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if constexpr (kEnabled) Add(stage_, ThreadCpuNs() - start_);
  }

 private:
  Stage stage_;
  int64_t start_ = 0;
};

// Cuts one thread's run into consecutive stages: each Mark charges the time
// since the last Mark (or the construction) to its stage.
class Splitter {
 public:
  Splitter() {
    if constexpr (kEnabled) last_ = ThreadCpuNs();
  }

  void Mark(Stage stage) {
    if constexpr (kEnabled) {
      const int64_t now = ThreadCpuNs();
      Add(stage, now - last_);
      last_ = now;
    }
  }

 private:
  int64_t last_ = 0;
};

}  // namespace delayd::server::stage_cpu

#endif  // DELAYD_SERVER_BASE_STAGE_CPU_H_
