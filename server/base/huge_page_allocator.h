// HugePageAllocator: an allocator for the tables that hold an entry per job
// (JobTimers' slots, a topic's ready set, a crowd's fired tags). Their
// lookups land at random in arrays of tens of MiB, so on 4 KiB pages nearly
// each one misses the TLB as well as the cache, and on a virtual machine a
// TLB miss is a two-dimensional page walk: in a profile of 200,000 jobs
// falling due among 1,000,000 pending, JobTimers::FiredBatch alone took 10%
// of the server's samples, nearly all on the load of the probed slot, and
// 1% with its table from this allocator.
//
// An allocation of 2 MiB or more is aligned to 2 MiB, rounded up to whole
// huge pages and advised MADV_HUGEPAGE, as the timing wheel's entry pool is
// (the kernel's transparent huge pages in their default "madvise" mode):
// at most one partly used huge page a table. Smaller ones come from the
// ordinary heap. The advice is best effort: where it is refused the memory
// is ordinary pages.
//
// Stateless: any two compare equal. Header-only. HugePageHashMap and
// HugePageHashSet are absl's flat tables on it.
#ifndef DELAYD_SERVER_BASE_HUGE_PAGE_ALLOCATOR_H_
#define DELAYD_SERVER_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace delayd::server {

inline constexpr size_t kHugePageBytes = size_t{1} << 21;  // 2 MiB

// `bytes` (a multiple of kHugePageBytes) aligned to a huge page and advised
// MADV_HUGEPAGE, best effort; nullptr when out of memory. Free with
// std::free.
inline void* AllocateHugePages(size_t bytes) {
  void* p = std::aligned_alloc(kHugePageBytes, bytes);
#ifdef MADV_HUGEPAGE
  if (p != nullptr) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>& /*other*/) {}  // NOLINT

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return std::allocator<T>().allocate(n);
    static_assert(alignof(T) <= kHugePageBytes);
    void* p = AllocateHugePages(RoundUp(bytes));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePageBytes) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    std::free(p);
  }

  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) {
    return true;
  }

 private:
  static size_t RoundUp(size_t bytes) {
    return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  }
};

// Hash tables on it, for keys hashed with absl::Hash.
template <typename K, typename V>
using HugePageHashMap =
    absl::flat_hash_map<K, V, absl::Hash<K>, std::equal_to<K>,
                        HugePageAllocator<std::pair<const K, V>>>;
template <typename K>
using HugePageHashSet = absl::flat_hash_set<K, absl::Hash<K>, std::equal_to<K>,
                                            HugePageAllocator<K>>;

}  // namespace delayd::server

#endif  // DELAYD_SERVER_BASE_HUGE_PAGE_ALLOCATOR_H_
