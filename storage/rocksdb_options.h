// The RocksDB tuning of the job store, in one place with its reasons.
// Internal to storage/ (RocksDbJobStore::Open is the only caller). Pure.
#ifndef DELAYD_STORAGE_ROCKSDB_OPTIONS_H_
#define DELAYD_STORAGE_ROCKSDB_OPTIONS_H_

#include <vector>

#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "storage/rocksdb_job_store.h"

namespace delayd::storage {

// Database-wide options. create_if_missing and
// create_missing_column_families are left false; Open sets them.
rocksdb::DBOptions MakeDbOptions(const RocksDbJobStore::Options& options);

// Descriptors of the default, jobs, due and expiry column families, in that
// order.
std::vector<rocksdb::ColumnFamilyDescriptor> MakeColumnFamilies(
    const RocksDbJobStore::Options& options);

// ReadOptions of ScanDue and ScanExpiry: keys-only sequential scans
// (recovery, the horizon loader, the sweeper) that must not evict the
// point-lookup working set.
rocksdb::ReadOptions DueScanReadOptions();

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_ROCKSDB_OPTIONS_H_
