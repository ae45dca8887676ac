// The store's meta record (StoreMeta under kMetaKey in the default column
// family, job_record.proto): the layout version RocksDbJobStore::Open checks.
// Internal to storage/. Thread-compatible (called once, from Open).
#ifndef DELAYD_STORAGE_STORE_META_H_
#define DELAYD_STORAGE_STORE_META_H_

#include <string>

#include "absl/status/status.h"
#include "rocksdb/db.h"

namespace delayd::storage {

// Checks the meta record of the open database `db` at `path`, or writes (and
// flushes) one into a store that has none and holds no jobs: a new store, or
// one whose creator died before writing it. Errors name the path:
// DATA_LOSS for a malformed meta record or jobs without one,
// FAILED_PRECONDITION for a layout version newer than kStoreLayoutVersion.
absl::Status CheckOrCreateMeta(rocksdb::DB* db,
                               rocksdb::ColumnFamilyHandle* jobs,
                               rocksdb::ColumnFamilyHandle* due,
                               const std::string& path);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_STORE_META_H_
