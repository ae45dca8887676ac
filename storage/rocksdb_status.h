// The one place that maps rocksdb::Status to absl::Status (and so, through
// the server, to gRPC codes). Internal to storage/. Pure; thread-safe.
//
//   rocksdb                                   absl
//   ---------------------------------------   -------------------
//   OK                                        OK
//   IOError/NoSpace, SpaceLimit; MemoryLimit  RESOURCE_EXHAUSTED
//   IOError (other), Busy, TimedOut,          UNAVAILABLE
//     TryAgain, Incomplete, ShutdownInProgress,
//     Aborted
//   Corruption                                DATA_LOSS
//   NotFound                                  NOT_FOUND
//   InvalidArgument                           INVALID_ARGUMENT
//   NotSupported                              UNIMPLEMENTED
//   anything else                             INTERNAL
#ifndef DELAYD_STORAGE_ROCKSDB_STATUS_H_
#define DELAYD_STORAGE_ROCKSDB_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/status.h"

namespace delayd::storage {

// The absl equivalent of `status`, with message "<context>: <rocksdb
// message>". OK maps to OK (context dropped).
absl::Status FromRocksDb(const rocksdb::Status& status,
                         absl::string_view context);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_ROCKSDB_STATUS_H_
