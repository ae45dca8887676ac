// One client thread of the crash test: random Schedule, ScheduleBatch,
// Reschedule, Cancel, CancelByPrefix and ScheduleStream calls against a
// running delayd, each reply recorded in the model of the keys it touched.
//
// Keys: every client owns kOwnedPerTopic keys per topic ("o<client>-<n>")
// and the fresh keys it makes ("f<client>-<n>"), so that one key's
// operations are sequential and the model exact. All clients also race on
// a few shared keys ("s-<n>") with operations whose effect does not depend
// on the prior state (REPLACE, Cancel); those are logged with their times
// and checked by ordering (CheckSharedKey).
//
// A ClientState is used by one thread at a time.
#ifndef DELAYD_TESTS_CRASH_CRASH_CLIENT_H_
#define DELAYD_TESTS_CRASH_CRASH_CLIENT_H_

#include <array>
#include <atomic>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "tests/crash/job_model.h"

namespace delayd::crash {

inline constexpr std::array<const char*, 2> kTopics = {"crash.a", "crash.b"};
inline constexpr int kOwnedPerTopic = 12;
inline constexpr int kSharedPerTopic = 4;

struct Key {
  std::string topic;
  std::string id;
  friend auto operator<=>(const Key&, const Key&) = default;
};

// Fire times are drawn around t0_ms so that none is near "now" while the
// test runs: 20% lie 1 s-10 min before t0 (READY at once), the rest 10-50 min
// after it (due within the hour, not within the minute).
int64_t RandomFireAtMs(std::mt19937_64& rng, int64_t t0_ms);

// One operation on a shared key as a client saw it: [start, end] encloses
// the moment the server applied it (end is InfiniteFuture when the outcome
// is unknown).
struct SharedOp {
  Key key;
  absl::Time start;
  absl::Time end;
  bool acknowledged = false;
  State effect;  // absolute: what the key holds right after it
  std::string what;
};

// Possible states of a shared key after a round that started from
// `initial`: the effect of any applied operation that no acknowledged one
// followed for sure, or `initial` when none was acknowledged.
std::vector<State> SharedCandidates(const State& initial,
                                    const std::vector<SharedOp>& ops);

struct ClientState {
  explicit ClientState(int index);

  const int index;
  std::map<Key, KeyModel> models;  // owned and fresh keys
  int64_t next_fresh = 0;

  // Reset each round.
  std::vector<SharedOp> shared_ops;
  // The fresh keys of each batch whose outcome is unknown: all or none of
  // each must exist after the restart.
  std::vector<std::vector<Key>> unknown_batches;
  std::vector<std::string> failures;
  int64_t calls = 0;
  int64_t unknown_calls = 0;
  // ScheduleStream calls, and those a kill (or another error) broke.
  int64_t streams = 0;
  int64_t broken_streams = 0;
};

// Calls random operations until one fails with an unknown outcome after
// `killed` became true.
void RunClient(std::shared_ptr<grpc::Channel> channel, uint64_t seed,
               int64_t t0_ms, const std::atomic<bool>& killed,
               ClientState& state);

}  // namespace delayd::crash

#endif  // DELAYD_TESTS_CRASH_CRASH_CLIENT_H_
