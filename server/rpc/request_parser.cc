#include "server/rpc/request_parser.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "server/jobs/validation.h"

namespace delayd::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Finds the first string field, at any depth, that holds invalid UTF-8.
absl::Status FindBadField(const Descriptor& type, const std::string& bytes,
                          const std::string& path) {
  UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.empty() ? "request" : path, ": not a valid ",
                     type.full_name(), " message"));
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    const FieldDescriptor* fd = type.FindFieldByNumber(field.number());
    if (fd == nullptr || field.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const std::string name =
        path.empty() ? fd->name() : absl::StrCat(path, ".", fd->name());
    if (fd->type() == FieldDescriptor::TYPE_STRING &&
        !IsValidUtf8(field.length_delimited())) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be valid UTF-8"));
    }
    if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (absl::Status s =
              FindBadField(*fd->message_type(), field.length_delimited(), name);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                          google::protobuf::Message& message) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (buffer.Dump(&slices).ok()) {
    bytes.reserve(buffer.Length());
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  if (message.ParseFromString(bytes)) return absl::OkStatus();
  absl::Status bad = FindBadField(*message.GetDescriptor(), bytes, "");
  if (!bad.ok()) return bad;
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ",
                   message.GetDescriptor()->full_name(), " message"));
}

void SerializeResponse(const google::protobuf::Message& message,
                       grpc::ByteBuffer& buffer) {
  grpc::Slice slice(message.SerializeAsString());
  buffer = grpc::ByteBuffer(&slice, 1);
}

}  // namespace delayd::server
