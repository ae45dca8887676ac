// Dispatcher: one dispatch round of a topic, on the delivery thread — takes
// ready jobs off the topic's queue up to the subscribers' free credit
// (round-robin, SubscriberSet::Reserve), re-reads them under their key
// locks, starts a lease of each (in memory: the job is IN_FLIGHT) and
// writes only its attempt mark (Mutation::MarkAttempt; one unsynced write
// for the round), then hands each Delivery to its subscriber's sink.
//
// Never early: a job whose stored due time is still ahead (moved later, or
// the wall clock stepped back since it fired) is re-armed, not sent. An
// IN_FLIGHT record without a lease (a delivery of an earlier process, which
// counted; recovery writes it from the attempt mark) is as good as READY
// while attempts remain; one out of attempts is written DEAD instead. A
// lease started for a subscriber that left before the send is undone (its
// mark as before): an attempt counts only for a delivery handed to a sink. A
// failed store read or write puts the jobs back on the queue and backs off 100
// ms (this is the delivery thread, not a gRPC callback).
//
// Thread-compatible: only the WorkLoop's thread calls Dispatch.
#ifndef DELAYD_SERVER_DELIVERY_DISPATCHER_H_
#define DELAYD_SERVER_DELIVERY_DISPATCHER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/delivery_state.h"
#include "server/delivery/work_loop.h"
#include "server/jobs/job_ledger.h"
#include "storage/mutation.h"

namespace delayd::server {

class Dispatcher {
 public:
  // Jobs taken off a ready queue per round: one store read and one write
  // each. Other topics and tasks get their turn between rounds. A topic's
  // first round takes at most kChunk, so the first jobs of a herd leave
  // within milliseconds; while its queue holds more than a round takes (a
  // backlog), each round takes twice the last, up to kMaxRound, and the
  // first round that empties the queue sets it back to kChunk. Bigger
  // rounds cost less per job: fewer store writes, stream messages and Ack
  // calls (BENCHMARKS.md, "Issue 19: a lighter load generator, two lease
  // threads, writers that block").
  static constexpr size_t kChunk = 256;
  static constexpr size_t kMaxRound = 1024;
  // While at least this many jobs of a topic are ready, a round is not
  // split evenly among its subscribers: each in turn takes all the free
  // credit it has, up to the round (SubscriberSet::Reserve's per_turn). A
  // round of 1024 among 4 subscribers is then one or two messages instead
  // of four of 256 (BENCHMARKS.md, "Issue 19: ... a backlog's rounds taken
  // in turns"). A turn is then at most 1/32 of what waits, so the shares
  // still even out.
  static constexpr int64_t kTurnBacklog = 32 * kMaxRound;

  // All must outlive it.
  Dispatcher(const DeliveryDeps& deps, DeliveryState* state, WorkLoop* loop)
      : d_(deps), state_(state), loop_(loop) {}
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // One round of `topic`; kicks it again when more may be ready.
  void Dispatch(const std::string& topic);

 private:
  // The stored record's state and attempts before a lease.
  struct Prior {
    v1::JobState state;
    uint32_t attempts;
  };

  // The ledger's view of a lease's start (before -> IN_FLIGHT) or undoing
  // (IN_FLIGHT -> before), from its attempt mark.
  static JobLedger::Change LeaseChange(const storage::Mutation& mark,
                                       v1::JobState before, v1::JobState after);

  // Writes back as they were the attempt marks of `orphans` (indexes into
  // `mutations` and `priors`): leased for a subscriber that left before
  // the delivery was handed to it, so no attempt was made. REQUIRES: the
  // keys' locks held.
  void UndoOrphans(const std::vector<size_t>& orphans,
                   const std::vector<Prior>& priors,
                   const std::vector<storage::Mutation>& mutations);

  const DeliveryDeps d_;
  DeliveryState* const state_;
  WorkLoop* const loop_;
  // The next round's size of each topic with a backlog (absent: kChunk).
  // Only the WorkLoop's thread touches it.
  absl::flat_hash_map<std::string, size_t> rounds_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_DISPATCHER_H_
