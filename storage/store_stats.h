// StoreStats: counters of a JobStore's writes, for the server to export
// (the store itself knows no metrics library). StoreCounters is the
// thread-safe accumulator behind them: lock-free, relaxed atomics.
#ifndef DELAYD_STORAGE_STORE_STATS_H_
#define DELAYD_STORAGE_STORE_STATS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace delayd::storage {

// A snapshot; every field counts since the store was opened.
struct StoreStats {
  // Non-empty Apply calls, successful or not.
  uint64_t writes = 0;
  // Apply calls that failed (including those refused because an earlier
  // write failed).
  uint64_t write_failures = 0;
  // Successful writes whose WAL was fsynced before they returned.
  uint64_t synced_writes = 0;
  // Mutations in successful writes.
  uint64_t mutations_written = 0;
  // Wall time spent in all writes, for a mean latency; the server measures
  // its own histogram around Apply.
  uint64_t write_micros_sum = 0;
};

class StoreCounters {
 public:
  StoreCounters() = default;
  StoreCounters(const StoreCounters&) = delete;
  StoreCounters& operator=(const StoreCounters&) = delete;

  void RecordWrite(bool ok, bool synced, size_t mutations,
                   absl::Duration latency);
  StoreStats Snapshot() const;

 private:
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> write_failures_{0};
  std::atomic<uint64_t> synced_writes_{0};
  std::atomic<uint64_t> mutations_written_{0};
  std::atomic<uint64_t> write_micros_sum_{0};
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_STORE_STATS_H_
