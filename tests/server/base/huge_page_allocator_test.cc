#include "server/base/huge_page_allocator.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace delayd::server {
namespace {

// The VmFlags of the mapping that holds `p`, from /proc/self/smaps; empty
// if none does.
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long start = 0;
    unsigned long end = 0;
    // A mapping's header: "start-end perms offset dev inode [path]".
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      inside = start <= addr && addr < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool KernelHasTransparentHugePages() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

TEST(HugePageAllocatorTest, LargeAllocationsAreAlignedAndAdvised) {
  HugePageAllocator<uint64_t> alloc;
  // 3 MiB: rounded up to two huge pages, both usable.
  const size_t n = (3 << 20) / sizeof(uint64_t);
  uint64_t* p = alloc.allocate(n);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  for (size_t i = 0; i < n; i += 512) p[i] = i;
  EXPECT_EQ(p[n - 512], n - 512);
  if (!KernelHasTransparentHugePages()) {
    alloc.deallocate(p, n);
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  // "hg": advised MADV_HUGEPAGE.
  const std::string flags = VmFlagsOf(p);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  alloc.deallocate(p, n);
}

TEST(HugePageAllocatorTest, SmallAllocationsComeFromTheHeap) {
  HugePageAllocator<uint64_t> alloc;
  uint64_t* p = alloc.allocate(100);
  ASSERT_NE(p, nullptr);
  p[99] = 7;
  EXPECT_EQ(p[99], 7u);
  alloc.deallocate(p, 100);
}

TEST(HugePageAllocatorTest, HoldsATableThatGrowsPastAHugePage) {
  HugePageHashMap<uint64_t, uint64_t> table;
  constexpr uint64_t kKeys = 300'000;  // about 8 MiB of slots
  for (uint64_t k = 0; k < kKeys; ++k) table.emplace(k * 7919, k);
  ASSERT_EQ(table.size(), kKeys);
  for (uint64_t k = 0; k < kKeys; k += 2) table.erase(k * 7919);
  for (uint64_t k = 0; k < kKeys; ++k) {
    auto it = table.find(k * 7919);
    if (k % 2 == 0) {
      EXPECT_EQ(it, table.end()) << k;
    } else {
      ASSERT_NE(it, table.end()) << k;
      EXPECT_EQ(it->second, k);
    }
  }
  table.clear();
  table.rehash(0);  // frees the large array
  EXPECT_TRUE(table.empty());
}

}  // namespace
}  // namespace delayd::server
