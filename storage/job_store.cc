#include "storage/job_store.h"

#include <optional>

#include "absl/strings/cord.h"

namespace delayd::storage {
namespace {

// Marks the refusal, so that no other UNAVAILABLE is taken for one.
constexpr char kWouldStall[] = "delayd.storage/would-stall";

}  // namespace

absl::Status WouldStallError() {
  absl::Status status =
      absl::UnavailableError("storage: the write would wait out a write stall");
  status.SetPayload(kWouldStall, absl::Cord());
  return status;
}

bool IsWouldStall(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         status.GetPayload(kWouldStall).has_value();
}

}  // namespace delayd::storage
