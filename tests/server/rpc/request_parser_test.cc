// server/rpc/request_parser.h: a ScheduleStreamRequest split into its
// requests without parsing them (other fields skipped, a message that is
// not one refused whole), and each request parsed on its own, a bad one
// refused naming its field.
#include "server/rpc/request_parser.h"

#include <string>
#include <string_view>
#include <vector>

#include "delayd/v1/delayd.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;

// `bytes` as gRPC hands them over, split into slices of `piece` bytes.
grpc::ByteBuffer Buffer(const std::string& bytes, size_t piece = 1 << 20) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.substr(i, piece));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

v1::StreamRequest Cancel(const std::string& id) {
  v1::StreamRequest r;
  r.mutable_cancel()->mutable_key()->set_topic("orders");
  r.mutable_cancel()->mutable_key()->set_id(id);
  return r;
}

absl::Status Split(const std::string& bytes,
                   std::vector<std::string>* items_out) {
  std::string flat;
  std::vector<std::string_view> items;
  absl::Status s = SplitRepeated(
      Buffer(bytes, 3), *v1::ScheduleStreamRequest::descriptor(),
      v1::ScheduleStreamRequest::kRequestsFieldNumber, flat, items);
  items_out->assign(items.begin(), items.end());
  return s;
}

TEST(SplitRepeatedTest, GivesEachRequestsBytesInOrder) {
  v1::ScheduleStreamRequest message;
  *message.add_requests() = Cancel("a");
  *message.add_requests() = v1::StreamRequest();  // empty: zero bytes
  *message.add_requests() = Cancel("c");
  std::vector<std::string> items;
  ASSERT_TRUE(Split(message.SerializeAsString(), &items).ok());
  EXPECT_THAT(items, ElementsAre(Cancel("a").SerializeAsString(), "",
                                 Cancel("c").SerializeAsString()));
}

TEST(SplitRepeatedTest, AnEmptyMessageHasNoRequests) {
  std::vector<std::string> items = {"stale"};
  ASSERT_TRUE(Split("", &items).ok());
  EXPECT_TRUE(items.empty());
}

// Fields other than `requests` (unknown to this server) are skipped, of
// every wire type.
TEST(SplitRepeatedTest, SkipsOtherFields) {
  const std::string a = Cancel("a").SerializeAsString();
  std::string bytes;
  bytes += std::string("\x10\x96\x01", 3);  // field 2, varint 150
  bytes += "\x0a" + std::string(1, static_cast<char>(a.size())) + a;
  bytes += std::string("\x1d\x01\x02\x03\x04", 5);  // field 3, fixed32
  bytes += std::string("\x22\x02xy", 4);            // field 4, bytes
  bytes += std::string("\x08\x01", 2);          // field 1 as a varint: unknown
  bytes += std::string("\x23\x08\x01\x24", 4);  // field 4, a group
  std::vector<std::string> items;
  ASSERT_TRUE(Split(bytes, &items).ok());
  EXPECT_THAT(items, ElementsAre(a));
}

TEST(SplitRepeatedTest, RefusesWhatIsNotAMessageWhole) {
  const std::string want =
      "request: not a valid delayd.v1.ScheduleStreamRequest message";
  for (const std::string& bytes : {
           std::string("\x0a\x05"
                       "abc",
                       5),                  // longer than what is left
           std::string("\x00\x01", 2),      // tag 0
           std::string("\x0a", 1),          // no length
           std::string("\x10", 1),          // a varint cut off
           std::string("\x0c", 1),          // end of a group never begun
           std::string("\x23\x08\x01", 3),  // a group never ended
       }) {
    std::vector<std::string> items;
    absl::Status s = Split(bytes, &items);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << testing::PrintToString(bytes);
    EXPECT_EQ(s.message(), want);
  }
}

TEST(ParseRequestTest, NamesTheFieldThatIsNotUtf8) {
  std::string bytes = Cancel("bad?").SerializeAsString();
  bytes.replace(bytes.find("bad?"), 4, "bad\xff");
  v1::StreamRequest r;
  absl::Status s = ParseRequest(std::string_view(bytes), r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cancel.key.id: must be valid UTF-8");
}

TEST(ParseRequestTest, ParsesAGoodRequest) {
  const std::string bytes = Cancel("a").SerializeAsString();
  v1::StreamRequest r;
  ASSERT_TRUE(ParseRequest(std::string_view(bytes), r).ok());
  EXPECT_EQ(r.cancel().key().id(), "a");
}

}  // namespace
}  // namespace delayd::server
