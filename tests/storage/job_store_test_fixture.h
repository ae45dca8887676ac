// JobStoreTest: the typed fixture of the JobStore contract tests, run
// against every implementation (Harnesses): InMemoryJobStore, and
// RocksDbJobStore in a temp dir with verify_previous_due on, reopened from
// its files where a test says so. Each test file instantiates it with
// TYPED_TEST_SUITE(JobStoreTest, Harnesses).
#ifndef DELAYD_TESTS_STORAGE_JOB_STORE_TEST_FIXTURE_H_
#define DELAYD_TESTS_STORAGE_JOB_STORE_TEST_FIXTURE_H_

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/in_memory_job_store.h"
#include "storage/rocksdb_job_store.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage::testing {

constexpr int64_t kAll = std::numeric_limits<int64_t>::max();

class InMemoryHarness {
 public:
  JobStore& store() { return store_; }
  void Reopen() {}
  void PutRawRecord(std::string_view topic, std::string_view id,
                    std::string bytes) {
    store_.PutRawRecordForTesting(topic, id, std::move(bytes));
  }

 private:
  InMemoryJobStore store_;
};

class RocksDbHarness {
 public:
  RocksDbHarness() { Reopen(); }
  JobStore& store() { return *store_; }
  void Reopen() {
    store_.reset();
    RocksDbJobStore::Options options;
    options.verify_previous_due = true;
    absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store =
        RocksDbJobStore::Open(dir_.path(), options);
    ASSERT_OK(store);
    store_ = *std::move(store);
  }
  void PutRawRecord(std::string_view topic, std::string_view id,
                    std::string bytes) {
    store_.reset();
    ASSERT_OK(testing::RawPut(dir_.path(), kJobsColumnFamily,
                              EncodeJobKey(topic, id), bytes));
    Reopen();
  }

 private:
  testing::TempDir dir_;
  std::unique_ptr<RocksDbJobStore> store_;
};

template <typename Harness>
class JobStoreTest : public ::testing::Test {
 protected:
  JobStore& store() { return harness_.store(); }

  void Put(const JobRecord& record, std::optional<int64_t> previous_due) {
    const Mutation m = Mutation::Put(record, previous_due);
    ASSERT_OK(store().Apply({&m, 1}, Durability::kSync));
  }

  std::vector<std::pair<int64_t, std::string>> DueEntries(int64_t from,
                                                          int64_t to) {
    std::vector<std::pair<int64_t, std::string>> out;
    EXPECT_OK(store().ScanDue(
        from, to,
        [&](int64_t due, std::string_view topic, std::string_view id) {
          out.emplace_back(due, std::string(topic) + "/" + std::string(id));
          return true;
        }));
    return out;
  }

  // "topic/id" -> its due entry's value, of every due entry.
  std::map<std::string, DueValue> Values() {
    std::map<std::string, DueValue> out;
    EXPECT_OK(this->store().ScanDueMarked(
        0, kAll,
        [&](int64_t, std::string_view topic, std::string_view id,
            const DueValue& value) {
          out[std::string(topic) + "/" + std::string(id)] = value;
          return true;
        }));
    return out;
  }

  // "topic/id" -> its attempt mark, of every due entry.
  std::map<std::string, uint32_t> Marks() {
    std::map<std::string, uint32_t> out;
    for (const auto& [key, value] : Values()) out[key] = value.mark;
    return out;
  }

  std::vector<std::pair<int64_t, std::string>> ExpiryEntries(int64_t from,
                                                             int64_t to) {
    std::vector<std::pair<int64_t, std::string>> out;
    EXPECT_OK(store().ScanExpiry(
        from, to, [&](int64_t at, std::string_view topic, std::string_view id) {
          out.emplace_back(at, std::string(topic) + "/" + std::string(id));
          return true;
        }));
    return out;
  }

  std::vector<std::string> Ids(std::string_view topic, std::string_view prefix,
                               std::string_view after) {
    std::vector<std::string> out;
    EXPECT_OK(store().ScanJobs(topic, prefix, after, [&](const JobRecord& r) {
      out.push_back(r.job().id());
      return true;
    }));
    return out;
  }

  Harness harness_;
};

using Harnesses = ::testing::Types<InMemoryHarness, RocksDbHarness>;

}  // namespace delayd::storage::testing

#endif  // DELAYD_TESTS_STORAGE_JOB_STORE_TEST_FIXTURE_H_
