// Job keys in memory: the (topic, id) pair, and the two hashes by which the
// server refers to a job without holding its strings (the wheel's tag and a
// check value). Pure functions; thread-safe.
#ifndef DELAYD_SERVER_JOBS_JOB_KEY_H_
#define DELAYD_SERVER_JOBS_JOB_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace delayd::server {

// Debian 12's Abseil has its own string_view type; storage hands out
// std::string_view.
inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

struct JobKey {
  std::string topic;
  std::string id;
  friend bool operator==(const JobKey&, const JobKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const JobKey& k) {
    return H::combine(std::move(h), k.topic, k.id);
  }
};

// Wheel tags share one Scheduler between two tag spaces told apart by the
// top bit: due timers carry a KeyHash (top bit clear), lease timers
// kLeaseTagBit | a lease sequence number (see Deliverer; sequence numbers
// start at 1). Three lease sequences are never used and name timers of
// their own: kHorizonTag, lease sequence 0, the memory-horizon loader's (see
// JobService); kFireRetryTag, the last sequence, the fire path's retry of
// due-index reads that failed (see FirePath); kLeftoverRetryTag, the one
// before, the Deliverer's retry of leftover CANCELED records it could not
// finish (see LeaseEndings::DeleteLeftoverCanceled).
inline constexpr uint64_t kLeaseTagBit = uint64_t{1} << 63;
inline constexpr uint64_t kHorizonTag = kLeaseTagBit;
inline constexpr uint64_t kFireRetryTag = ~uint64_t{0};
inline constexpr uint64_t kLeftoverRetryTag = ~uint64_t{0} - 1;

// A job's due timer (top bit clear), as opposed to every other tag.
inline bool IsDueTag(uint64_t tag) { return (tag & kLeaseTagBit) == 0; }

inline bool IsLeaseTag(uint64_t tag) {
  return (tag & kLeaseTagBit) != 0 && tag != kHorizonTag &&
         tag != kFireRetryTag && tag != kLeftoverRetryTag;
}

// The due-timer tag of a job: a 63-bit hash of its key (top bit clear),
// stable within one process (not across restarts; nothing persists it).
inline uint64_t KeyHash(absl::string_view topic, absl::string_view id) {
  return absl::Hash<std::tuple<absl::string_view, absl::string_view>>{}(
             std::make_tuple(topic, id)) &
         ~kLeaseTagBit;
}

// A second, independent 32-bit hash (FNV-1a), to tell apart two keys whose
// KeyHash collides.
inline uint32_t KeyCheck(absl::string_view topic, absl::string_view id) {
  uint32_t h = 2166136261u;
  auto mix = [&h](absl::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
  };
  mix(topic);
  h = (h ^ 0xffu) * 16777619u;  // separator: a byte no topic contains
  mix(id);
  return h;
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_JOB_KEY_H_
