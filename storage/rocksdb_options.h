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

// ReadOptions of ScanDue, ScanDueMarked and ScanExpiry: sequential scans
// (recovery, the horizon loader, the sweeper) that must not evict the
// point-lookup working set.
rocksdb::ReadOptions DueScanReadOptions();
// ReadOptions of the fire path's scans (ScanFireMillisecond and
// ScanDueFrom). It reads the same blocks again soon: its
// chunks' re-reads under their locks, a few keys each. So they fill the
// block cache, and the readahead is RocksDB's own, which starts at 8 KiB
// and grows only on sequential reads. With DueScanReadOptions every
// iterator (on a herd, every chunk of 1,024 jobs) opens table readers that
// read 2 MiB ahead, and finds nothing cached: the first chunk of a herd of
// 1M took 9-16 ms to re-read, now under 1 ms.
rocksdb::ReadOptions FireScanReadOptions();

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_ROCKSDB_OPTIONS_H_
