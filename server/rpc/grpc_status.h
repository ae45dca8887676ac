// The one place where absl::Status becomes grpc::Status. The codes are the
// same numbers on both sides (both follow google.rpc.Code).
#ifndef DELAYD_SERVER_RPC_GRPC_STATUS_H_
#define DELAYD_SERVER_RPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace delayd::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_GRPC_STATUS_H_
