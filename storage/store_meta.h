// The store's meta record (StoreMeta under kMetaKey in the default column
// family, job_record.proto): the layout version RocksDbJobStore::Open checks.
// Internal to storage/. Thread-compatible (called once, from Open).
#ifndef DELAYD_STORAGE_STORE_META_H_
#define DELAYD_STORAGE_STORE_META_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/db.h"

namespace delayd::storage {

// Checks the meta record of the open database `db` at `path` and returns its
// layout version (at most kStoreLayoutVersion), or writes (and flushes) one
// of kStoreLayoutVersion into a store that has none and holds no jobs (a new
// store, or one whose creator died before writing it) and returns that.
// Errors name the path: DATA_LOSS for a malformed meta record or jobs
// without one, FAILED_PRECONDITION for a layout version newer than
// kStoreLayoutVersion.
absl::StatusOr<uint32_t> CheckOrCreateMeta(rocksdb::DB* db,
                                           rocksdb::ColumnFamilyHandle* jobs,
                                           rocksdb::ColumnFamilyHandle* due,
                                           const std::string& path);

// Stores (synced, then flushed) a meta record of `layout_version`: the last
// step of a migration.
absl::Status WriteMeta(rocksdb::DB* db, uint32_t layout_version,
                       const std::string& path);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_STORE_META_H_
