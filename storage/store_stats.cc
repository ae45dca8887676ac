#include "storage/store_stats.h"

namespace delayd::storage {

void StoreCounters::RecordWrite(bool ok, bool synced, size_t mutations,
                                absl::Duration latency) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  writes_.fetch_add(1, kRelaxed);
  if (!ok) {
    write_failures_.fetch_add(1, kRelaxed);
  } else {
    if (synced) synced_writes_.fetch_add(1, kRelaxed);
    mutations_written_.fetch_add(mutations, kRelaxed);
  }
  const int64_t micros = absl::ToInt64Microseconds(latency);
  write_micros_sum_.fetch_add(micros > 0 ? static_cast<uint64_t>(micros) : 0,
                              kRelaxed);
}

StoreStats StoreCounters::Snapshot() const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  StoreStats s;
  s.writes = writes_.load(kRelaxed);
  s.write_failures = write_failures_.load(kRelaxed);
  s.synced_writes = synced_writes_.load(kRelaxed);
  s.mutations_written = mutations_written_.load(kRelaxed);
  s.write_micros_sum = write_micros_sum_.load(kRelaxed);
  return s;
}

}  // namespace delayd::storage
