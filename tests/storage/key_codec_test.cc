#include "storage/key_codec.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::testing::HasSubstr;

TEST(KeyCodecTest, JobKeyRoundTrips) {
  const std::string key = EncodeJobKey("orders.close", "order-8812");
  EXPECT_EQ(key, std::string("orders.close\0order-8812", 23));
  ASSERT_OK_AND_ASSIGN(JobKeyView view, DecodeJobKey(key));
  EXPECT_EQ(view.topic, "orders.close");
  EXPECT_EQ(view.id, "order-8812");
}

TEST(KeyCodecTest, MalformedJobKeysAreDataLoss) {
  EXPECT_EQ(DecodeJobKey("no-separator").status().code(),
            absl::StatusCode::kDataLoss);
  absl::Status s = DecodeJobKey(std::string("\0id", 3)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("\\000id"));
}

TEST(KeyCodecTest, TopicsAreContiguousAndOrdered) {
  std::vector<std::string> keys = {
      EncodeJobKey("a.b", "0"), EncodeJobKey("a", "zzz"),
      EncodeJobKey("ab", "0"), EncodeJobKey("a", "0")};
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{
                      EncodeJobKey("a", "0"), EncodeJobKey("a", "zzz"),
                      EncodeJobKey("a.b", "0"), EncodeJobKey("ab", "0")}));
}

TEST(KeyCodecTest, DueTimeIsBigEndian) {
  EXPECT_EQ(EncodeDueTime(0x0102030405060708),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(EncodeDueTime(0), std::string(8, '\0'));
}

TEST(KeyCodecTest, DueKeysSortByTimeAcrossYearsThenByJobKey) {
  // 1970, byte boundaries, 2026, 2126, the largest value.
  const std::vector<int64_t> times = {0,
                                      1,
                                      255,
                                      256,
                                      65535,
                                      65536,
                                      1'780'000'000'000,
                                      4'935'000'000'000,
                                      std::numeric_limits<int64_t>::max()};
  std::vector<std::string> keys;
  for (int64_t t : times) keys.push_back(EncodeDueKey(t, "t", "id"));
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  // Within one millisecond: by topic \0 id.
  EXPECT_LT(EncodeDueKey(7, "a", "zz"), EncodeDueKey(7, "a.b", "a"));
  EXPECT_LT(EncodeDueKey(7, "a", "10"), EncodeDueKey(7, "a", "2"));
  EXPECT_LT(EncodeDueKey(7, "z", "z"), EncodeDueKey(8, "a", "a"));
}

TEST(KeyCodecTest, NegativeDueTimesClampToZero) {
  EXPECT_EQ(ClampDueMs(-1), 0);
  EXPECT_EQ(ClampDueMs(std::numeric_limits<int64_t>::min()), 0);
  EXPECT_EQ(EncodeDueKey(-5, "t", "x"), EncodeDueKey(0, "t", "x"));
  ASSERT_OK_AND_ASSIGN(DueKeyView due,
                       DecodeDueKey(EncodeDueKey(-5, "t", "x")));
  EXPECT_EQ(due.due_ms, 0);
}

TEST(KeyCodecTest, DueKeyRoundTrips) {
  const std::string key = EncodeDueKey(1'780'000'000'123, "orders", "o-1");
  ASSERT_OK_AND_ASSIGN(DueKeyView due, DecodeDueKey(key));
  EXPECT_EQ(due.due_ms, 1'780'000'000'123);
  EXPECT_EQ(due.topic, "orders");
  EXPECT_EQ(due.id, "o-1");
}

TEST(KeyCodecTest, MalformedDueKeysAreDataLoss) {
  EXPECT_EQ(DecodeDueKey("short").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDueKey(std::string(8, '\0')).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDueKey(std::string(8, '\xff') + std::string("t\0x", 3))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDueKey(std::string(8, '\0') + "no-separator").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(KeyCodecTest, DueValuesRoundTripAndEmptyIsNone) {
  const std::string key = EncodeDueKey(5, "t", "a");
  for (uint32_t mark : {0u, 1u, 127u, 128u, 16'383u, 16'384u, 1u << 28,
                        std::numeric_limits<uint32_t>::max()}) {
    for (uint64_t bytes :
         {uint64_t{0}, uint64_t{1}, uint64_t{300}, uint64_t{16} << 20,
          std::numeric_limits<uint64_t>::max()}) {
      SCOPED_TRACE(absl::StrCat(mark, " ", bytes));
      const DueValue value{mark, bytes};
      ASSERT_OK_AND_ASSIGN(DueValue got,
                           DecodeDueValue(key, EncodeDueValue(value)));
      EXPECT_EQ(got, value);
    }
  }
  EXPECT_EQ(EncodeDueValue({1, 0}), "\x01");
  EXPECT_EQ(EncodeDueValue({0, 300}), std::string("\x00\xac\x02", 3));
  EXPECT_EQ(EncodeDueValue({0, 0}), "");
  ASSERT_OK_AND_ASSIGN(DueValue none, DecodeDueValue(key, ""));
  EXPECT_EQ(none, (DueValue{0, 0}));
}

// Layouts 3 to 5 wrote a lone varint32 mark: it reads as that mark with no
// payload size.
TEST(KeyCodecTest, AnOldAttemptMarkDecodesWithoutAPayloadSize) {
  const std::string key = EncodeDueKey(5, "t", "a");
  ASSERT_OK_AND_ASSIGN(DueValue got, DecodeDueValue(key, "\x81\x01"));
  EXPECT_EQ(got, (DueValue{129, 0}));
  ASSERT_OK_AND_ASSIGN(got, DecodeDueValue(key, "\xff\xff\xff\xff\x0f"));
  EXPECT_EQ(got, (DueValue{kRecurringMark, 0}));
}

TEST(KeyCodecTest, MalformedDueValuesAreDataLossNamingTheKey) {
  const std::string key = EncodeDueKey(5, "t", "a");
  for (const std::string& value :
       {std::string("\x80"),                  // a mark cut short
        std::string("\x81\x01\x01\x01"),      // bytes after the size
        std::string("\x01\x80"),              // a size cut short
        std::string("\xff\xff\xff\xff\x10"),  // a mark of 2^32
        std::string("\x80\x80\x80\x80\x80\x01"),
        // A size of 2^64.
        std::string("\x01\x80\x80\x80\x80\x80\x80\x80\x80\x80\x02", 11)}) {
    SCOPED_TRACE(PrintableKey(value));
    const absl::StatusOr<DueValue> got = DecodeDueValue(key, value);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(got.status().message(), HasSubstr("t\\000a"));
  }
}

TEST(KeyCodecTest, PrefixSuccessor) {
  EXPECT_EQ(PrefixSuccessor(std::string("t\0", 2)), "t\x01");
  EXPECT_EQ(PrefixSuccessor("ab\xff\xff"), "ac");
  EXPECT_EQ(PrefixSuccessor("\xff"), "");
  EXPECT_EQ(PrefixSuccessor(""), "");
}

TEST(KeyCodecTest, JobScanRange) {
  KeyRange all = JobScanRange("t", "", "");
  EXPECT_EQ(all.begin, std::string("t\0", 2));
  EXPECT_EQ(all.end, "t\x01");
  KeyRange prefixed = JobScanRange("t", "ab", "");
  EXPECT_EQ(prefixed.begin, std::string("t\0ab", 4));
  EXPECT_EQ(prefixed.end, std::string("t\0ac", 4));
  KeyRange after = JobScanRange("t", "ab", "abc");
  EXPECT_EQ(after.begin, std::string("t\0abc\0", 6));
  // A cursor before the prefix does not widen the range.
  EXPECT_EQ(JobScanRange("t", "b", "a").begin, std::string("t\0b", 3));
  // A cursor past the prefix empties it.
  KeyRange past = JobScanRange("t", "a", "b");
  EXPECT_GE(past.begin, past.end);
}

}  // namespace
}  // namespace delayd::storage
