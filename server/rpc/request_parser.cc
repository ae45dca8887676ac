#include "server/rpc/request_parser.h"

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/wire_format_lite.h"
#include "server/jobs/validation.h"

namespace delayd::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using google::protobuf::internal::WireFormatLite;

// Finds the first string field, at any depth, that holds invalid UTF-8.
absl::Status FindBadField(const Descriptor& type, std::string_view bytes,
                          const std::string& path) {
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
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

void Flatten(const grpc::ByteBuffer& buffer, std::string& bytes) {
  bytes.clear();
  std::vector<grpc::Slice> slices;
  if (buffer.Dump(&slices).ok()) {
    bytes.reserve(buffer.Length());
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
}

absl::Status NotA(const Descriptor& type) {
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ", type.full_name(), " message"));
}

}  // namespace

absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                          google::protobuf::Message& message) {
  std::string bytes;
  Flatten(buffer, bytes);
  return ParseRequest(bytes, message);
}

absl::Status ParseRequest(std::string_view bytes,
                          google::protobuf::Message& message) {
  if (bytes.size() <= static_cast<size_t>(INT_MAX) &&
      message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  message.Clear();
  absl::Status bad = FindBadField(*message.GetDescriptor(), bytes, "");
  if (!bad.ok()) return bad;
  return NotA(*message.GetDescriptor());
}

absl::Status SplitRepeated(const grpc::ByteBuffer& buffer,
                           const Descriptor& type, int field,
                           std::string& bytes,
                           std::vector<std::string_view>& items) {
  items.clear();
  Flatten(buffer, bytes);
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return NotA(type);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const int size = static_cast<int>(bytes.size());
  google::protobuf::io::CodedInputStream in(data, size);
  while (in.CurrentPosition() < size) {
    const uint32_t tag = in.ReadTag();
    // 0 is no field: a read past the end, or a zero tag.
    if (tag == 0) return NotA(type);
    // Another field, or `field` of another wire type: protobuf keeps
    // either as an unknown field, so it is skipped here too.
    if (WireFormatLite::GetTagFieldNumber(tag) != field ||
        WireFormatLite::GetTagWireType(tag) !=
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return NotA(type);
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) ||
        length > static_cast<uint32_t>(size - in.CurrentPosition())) {
      return NotA(type);
    }
    items.emplace_back(bytes.data() + in.CurrentPosition(), length);
    in.Skip(static_cast<int>(length));
  }
  return absl::OkStatus();
}

void SerializeResponse(const google::protobuf::Message& message,
                       grpc::ByteBuffer& buffer) {
  grpc::Slice slice(message.SerializeAsString());
  buffer = grpc::ByteBuffer(&slice, 1);
}

}  // namespace delayd::server
