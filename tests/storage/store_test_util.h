// Helpers for the storage tests: a self-deleting temp dir, raw access to a
// store's RocksDB database (to plant what the store would never write), a
// record builder, and a dump of a store's whole content for comparisons.
// Not thread-safe unless noted.
#ifndef DELAYD_TESTS_STORAGE_STORE_TEST_UTIL_H_
#define DELAYD_TESTS_STORAGE_STORE_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "storage/job_store.h"
#include "storage/rocksdb_job_store.h"

namespace delayd::storage::testing {

// A fresh directory under ::testing::TempDir(), removed with its content on
// destruction.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The RocksDbJobStore at `path`, opened with the default options; nullptr,
// and a failure of the current test, when it does not open.
std::unique_ptr<RocksDbJobStore> MustOpenRocksDb(const std::string& path);

// Puts or deletes (value nullptr) one key of column family `cf` ("default",
// "jobs", "due" or "expiry") of the closed store at `path`, with a plain
// RocksDB.
absl::Status RawPut(const std::string& path, const std::string& cf,
                    std::string_view key, std::string_view value);
absl::Status RawDelete(const std::string& path, const std::string& cf,
                       std::string_view key);

// A live-or-not record of (topic, id) due at fire_at_ms.
JobRecord MakeRecord(
    std::string_view topic, std::string_view id, int64_t fire_at_ms,
    delayd::v1::JobState state = delayd::v1::JOB_STATE_SCHEDULED,
    std::string_view payload = "payload");

// Everything a store holds, in key order: records (serialized
// deterministically) by job key, the due entries and the expiry entries.
struct StoreDump {
  std::map<std::string, std::string> records;
  std::vector<std::string> due_keys;
  std::vector<std::string> expiry_keys;
  bool operator==(const StoreDump& other) const = default;
};

// Dumps every topic's records and the whole due and expiry indexes. Fails
// the current test on a store error.
StoreDump Dump(const JobStore& store);

// Expects the due index to hold exactly DueIndexEntryOf of every record, and
// the expiry index exactly ExpiryIndexEntryOf of every record.
void ExpectDueIndexConsistent(const StoreDump& dump);

// Deterministic serialization (map fields sorted), for comparisons.
std::string Canonical(const JobRecord& record);

}  // namespace delayd::storage::testing

#endif  // DELAYD_TESTS_STORAGE_STORE_TEST_UTIL_H_
