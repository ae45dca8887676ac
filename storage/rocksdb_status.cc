#include "storage/rocksdb_status.h"

#include "absl/strings/str_cat.h"

namespace delayd::storage {
namespace {

absl::StatusCode CodeOf(const rocksdb::Status& s) {
  if (s.IsNoSpace() || s.IsMemoryLimit() ||
      (s.IsIOError() && s.subcode() == rocksdb::Status::kSpaceLimit)) {
    return absl::StatusCode::kResourceExhausted;
  }
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain() ||
      s.IsIncomplete() || s.IsShutdownInProgress() || s.IsAborted()) {
    return absl::StatusCode::kUnavailable;
  }
  if (s.IsCorruption()) return absl::StatusCode::kDataLoss;
  if (s.IsNotFound()) return absl::StatusCode::kNotFound;
  if (s.IsInvalidArgument()) return absl::StatusCode::kInvalidArgument;
  if (s.IsNotSupported()) return absl::StatusCode::kUnimplemented;
  return absl::StatusCode::kInternal;
}

}  // namespace

absl::Status FromRocksDb(const rocksdb::Status& status,
                         absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(CodeOf(status),
                      absl::StrCat(context, ": ", status.ToString()));
}

}  // namespace delayd::storage
