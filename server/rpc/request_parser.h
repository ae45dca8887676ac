// Parsing of request bytes for the raw gRPC handlers. protobuf refuses a
// message whose string field holds invalid UTF-8 without saying which field;
// delayd must answer INVALID_ARGUMENT naming it. So the service takes raw
// bytes and parses them here: on failure, the wire format is walked against
// the message's descriptor to find the field at fault. Pure functions;
// thread-safe.
#ifndef DELAYD_SERVER_RPC_REQUEST_PARSER_H_
#define DELAYD_SERVER_RPC_REQUEST_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace delayd::server {

// Parses `buffer` into `message`. INVALID_ARGUMENT naming the field
// ("job.id: must be valid UTF-8") or the message when it does not parse.
absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                          google::protobuf::Message& message);
// The same for bytes at hand.
absl::Status ParseRequest(std::string_view bytes,
                          google::protobuf::Message& message);

// Splits a message of `type` whose field number `field` is a repeated
// message (ScheduleStreamRequest's requests) into the bytes of each item,
// in order, without parsing them, so that each item is parsed (and
// refused) on its own. `bytes` receives the message flattened; `items`
// views into it. Other fields, and `field` of another wire type, are
// skipped, as protobuf keeps them as unknown fields. INVALID_ARGUMENT
// ("request: not a valid TYPE message") when the bytes are not a message.
absl::Status SplitRepeated(const grpc::ByteBuffer& buffer,
                           const google::protobuf::Descriptor& type, int field,
                           std::string& bytes,
                           std::vector<std::string_view>& items);

// Serializes `message` into `buffer`.
void SerializeResponse(const google::protobuf::Message& message,
                       grpc::ByteBuffer& buffer);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_RPC_REQUEST_PARSER_H_
