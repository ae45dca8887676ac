// Parsing of request bytes for the raw gRPC handlers. protobuf refuses a
// message whose string field holds invalid UTF-8 without saying which field;
// delayd must answer INVALID_ARGUMENT naming it. So the service takes raw
// bytes and parses them here: on failure, the wire format is walked against
// the message's descriptor to find the field at fault. Pure functions;
// thread-safe.
#ifndef DELAYD_SERVER_RPC_REQUEST_PARSER_H_
#define DELAYD_SERVER_RPC_REQUEST_PARSER_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace delayd::server {

// Parses `buffer` into `message`. INVALID_ARGUMENT naming the field
// ("job.id: must be valid UTF-8") or the message when it does not parse.
absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                          google::protobuf::Message& message);

// Serializes `message` into `buffer`.
void SerializeResponse(const google::protobuf::Message& message,
                       grpc::ByteBuffer& buffer);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_REQUEST_PARSER_H_
