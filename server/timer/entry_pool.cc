#include "server/timer/entry_pool.h"

#include <cstdio>
#include <cstdlib>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace delayd::timer {
namespace {

constexpr size_t kHugePage = size_t{1} << 21;  // 2 MiB

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "delayd::timer::EntryPool: %s\n", what);
  std::abort();
}

}  // namespace

void EntryPool::FreeDeleter::operator()(WheelEntry* p) const { std::free(p); }

void EntryPool::AddChunk() {
  constexpr size_t kChunkBytes = kChunkSize * sizeof(WheelEntry);
  static_assert(kChunkBytes % kHugePage == 0);
  if (chunks_.size() >= (size_t{1} << (32 - kChunkBits))) {
    Die("more than 2^32 entries");
  }
  void* p = std::aligned_alloc(kHugePage, kChunkBytes);
  if (p == nullptr) Die("out of memory");
#ifdef MADV_HUGEPAGE
  // Best effort: fewer TLB misses on random access. Failure is harmless.
  madvise(p, kChunkBytes, MADV_HUGEPAGE);
#endif
  chunks_.emplace_back(static_cast<WheelEntry*>(p));
}

uint32_t EntryPool::AllocateNew() {
  if (high_water_ == kNone) Die("more than 2^32 - 1 entries");
  if ((high_water_ >> kChunkBits) >= chunks_.size()) AddChunk();
  const uint32_t i = high_water_++;
  (*this)[i].generation = 1;  // in use
  return i;
}

void EntryPool::Reserve(size_t n) {
  if (n <= free_count_) return;
  const size_t needed = size_t{high_water_} + (n - free_count_);
  while (chunks_.size() * kChunkSize < needed) AddChunk();
}

size_t EntryPool::MemoryBytes() const {
  return chunks_.size() * kChunkSize * sizeof(WheelEntry) +
         chunks_.capacity() * sizeof(Chunk);
}

}  // namespace delayd::timer
