// SetDeadline: the deadline of a test's gRPC call, as a timeout from now.
// Header-only; thread-safe.
#ifndef DELAYD_TESTS_SUPPORT_RPC_DEADLINE_H_
#define DELAYD_TESTS_SUPPORT_RPC_DEADLINE_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace delayd::testing {

inline void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_SUPPORT_RPC_DEADLINE_H_
