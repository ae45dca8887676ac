// Deliverer at the edges of its inputs: Duration fields at and past their
// limits and past what int64 milliseconds hold (refused, changing nothing),
// backoff arithmetic at its extremes, and every reply checked for invalid
// Timestamps and Durations — by the fake clock.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "delayd/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/delivery/ack_token.h"
#include "server/delivery/deliverer.h"
#include "server/delivery/lease_endings.h"
#include "tests/server/delivery/deliverer_test_util.h"
#include "tests/support/valid_time.h"

namespace delayd::server::testing {
namespace {

using ::delayd::testing::InvalidTimeFields;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
// The largest Duration protobuf allows: 10,000 years.
constexpr int64_t kMaxProtoDurationSeconds = 315'576'000'000;

google::protobuf::Duration Dur(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

// Durations that are no valid extend_by or retry_after: negative, malformed,
// past the limit, and past what seconds * 1000 holds in an int64.
std::vector<google::protobuf::Duration> OutOfRange(int64_t max_seconds) {
  return {
      Dur(9'223'372'036'854'776, 0),   // * 1000 wraps negative
      Dur(18'446'744'073'709'552, 0),  // * 1000 wraps to 384 ms
      Dur(kInt64Max, 0),
      Dur(kInt64Max, 999'999'999),
      Dur(kInt64Min, 0),
      Dur(kInt64Min, -999'999'999),
      Dur(kMaxProtoDurationSeconds, 999'999'999),
      Dur(-kMaxProtoDurationSeconds, 0),
      Dur(-1, 0),
      Dur(0, -1),
      Dur(-1, -1),
      Dur(0, 1'000'000'000),
      Dur(1, std::numeric_limits<int32_t>::max()),
      Dur(1, std::numeric_limits<int32_t>::min()),
      Dur(max_seconds + 1, 0),
      Dur(max_seconds, 1),  // rounds up past the limit
  };
}

TEST_F(DelivererTest, ExtendLeaseRefusesOutOfRangeExtendByAndChangesNothing) {
  service().Start();
  Sub sub = Subscribe("t");
  MustScheduleWith("t", "a", 0, v1::RetryPolicy());
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const std::string token = sub.sink->at(0).ack_token();
  const int64_t deadline = Stored("t", "a")->lease_expires_at_ms();
  const int64_t max_s = absl::ToInt64Seconds(limits_.max_lease);
  v1::ExtendLeaseRequest req;
  req.set_ack_token(token);
  for (const google::protobuf::Duration& by : OutOfRange(max_s)) {
    SCOPED_TRACE(by.ShortDebugString());
    *req.mutable_extend_by() = by;
    const absl::Status s = service().ExtendLease(req).status();
    ExpectInvalid(s, "extend_by");
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(max_s, " s")));
    EXPECT_EQ(Stored("t", "a")->lease_expires_at_ms(), deadline);
  }
  Quiesce();
  EXPECT_EQ(sub.sink->count(), 1u);  // the lease is intact: no redelivery
  // The limit itself, and the smallest extension, are fine.
  for (const google::protobuf::Duration& by :
       {Dur(max_s, 0), Dur(0, 1), Dur(0, 999'999'999)}) {
    SCOPED_TRACE(by.ShortDebugString());
    *req.mutable_extend_by() = by;
    ASSERT_OK_AND_ASSIGN(v1::ExtendLeaseResponse r, service().ExtendLease(req));
    EXPECT_THAT(InvalidTimeFields(r), IsEmpty());
    const int64_t ms = by.seconds() * 1000 + (by.nanos() + 999'999) / 1'000'000;
    EXPECT_EQ(Ms(r.lease_expires_at()), clock_.NowMs() + ms);
  }
  EXPECT_EQ(AckCode(token), absl::StatusCode::kOk);
}

TEST_F(DelivererTest, NackRefusesOutOfRangeRetryAfterAndChangesNothing) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const std::string token = sub.sink->at(0).ack_token();
  const storage::JobRecord before = *Stored("t", "a");
  const int64_t max_s = absl::ToInt64Seconds(limits_.max_schedule_ahead);
  v1::NackRequest req;
  req.set_ack_token(token);
  for (const google::protobuf::Duration& after : OutOfRange(max_s)) {
    SCOPED_TRACE(after.ShortDebugString());
    *req.mutable_retry_after() = after;
    const absl::Status s = service().Nack(req).status();
    ExpectInvalid(s, "retry_after");
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(max_s, " s")));
    EXPECT_EQ(Stored("t", "a")->SerializeAsString(),
              before.SerializeAsString());
  }
  *req.mutable_retry_after() = Dur(max_s, 0);
  ASSERT_OK_AND_ASSIGN(v1::NackResponse r, service().Nack(req));
  EXPECT_THAT(InvalidTimeFields(r), IsEmpty());
  EXPECT_EQ(Ms(r.job().fire_at()), clock_.NowMs() + max_s * 1000);
}

v1::RetryPolicy Policy(google::protobuf::Duration initial,
                       google::protobuf::Duration max, double multiplier) {
  v1::RetryPolicy retry;
  retry.set_max_attempts(1000);
  *retry.mutable_lease() = DurationMs(30'000);
  *retry.mutable_initial_backoff() = initial;
  *retry.mutable_max_backoff() = max;
  retry.set_backoff_multiplier(multiplier);
  return retry;
}

TEST(BackoffTest, StaysWithinZeroAndTheCapAtTheExtremes) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<google::protobuf::Duration> durations = {
      Dur(0, 0),
      Dur(0, 1'000'000),
      Dur(1, 0),
      Dur(3'155'760'000, 0),  // 100 years: the largest the api allows
      Dur(kMaxProtoDurationSeconds, 999'999'999),
      Dur(9'223'372'036'854'776, 0),
      Dur(kInt64Max, 999'999'999),
      Dur(-1, 0),
      Dur(kInt64Min, -999'999'999),
  };
  const std::vector<double> multipliers = {1, 1.5, 2,   100, 0.5,
                                           0, -2,  inf, nan};
  const std::vector<uint32_t> attempts = {
      0, 1, 2, 155, 156, 157, 1000, 1001, std::numeric_limits<uint32_t>::max()};
  for (const auto& initial : durations) {
    for (const auto& max : durations) {
      const int64_t cap =
          std::max<int64_t>(0, delayd::DurationMsSaturated(max));
      for (double m : multipliers) {
        for (uint32_t attempt : attempts) {
          SCOPED_TRACE(absl::StrCat("initial ", initial.ShortDebugString(),
                                    " max ", max.ShortDebugString(), " m ", m,
                                    " attempt ", attempt));
          const int64_t ms = BackoffMs(Policy(initial, max, m), attempt);
          ASSERT_GE(ms, 0);
          ASSERT_LE(ms, cap);
        }
      }
    }
  }
}

TEST(BackoffTest, ZeroInitialBackoffStaysZeroWhenThePowerOverflows) {
  const v1::RetryPolicy retry =
      Policy(Dur(0, 0), Dur(600, 0), /*multiplier=*/100);
  for (uint32_t attempt : {1u, 155u, 156u, 157u, 1000u}) {
    EXPECT_EQ(BackoffMs(retry, attempt), 0) << "attempt " << attempt;
  }
}

TEST(BackoffTest, GrowthPastDoubleRangeIsTheCap) {
  const v1::RetryPolicy retry =
      Policy(Dur(0, 1'000'000), Dur(3'155'760'000, 0), /*multiplier=*/100);
  EXPECT_EQ(BackoffMs(retry, 1), 1);
  EXPECT_EQ(BackoffMs(retry, 3), 10'000);
  EXPECT_EQ(BackoffMs(retry, 157), 3'155'760'000'000);
  EXPECT_EQ(BackoffMs(retry, 1000), 3'155'760'000'000);
  // Initial above the cap: the cap.
  EXPECT_EQ(BackoffMs(Policy(Dur(20, 0), Dur(10, 0), 2), 1), 10'000);
}

TEST(DurationMsSaturatedTest, SaturatesAtTheInt64Range) {
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(1, 500'000'000)), 1500);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(-1, -500'000'000)), -1500);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(kMaxProtoDurationSeconds, 0)),
            kMaxProtoDurationSeconds * 1000);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(9'223'372'036'854'776, 0)),
            kInt64Max);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(18'446'744'073'709'552, 0)),
            kInt64Max);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(kInt64Max, 999'999'999)),
            kInt64Max);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(kInt64Max / 1000, 999'999'999)),
            kInt64Max);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(kInt64Min, -999'999'999)),
            kInt64Min);
  EXPECT_EQ(delayd::DurationMsSaturated(Dur(kInt64Min / 1000, -999'999'999)),
            kInt64Min);
}

// Initial backoff 0 and multiplier 100: from attempt ~156 on, 100^(attempt-1)
// is infinite. Every reply stays valid, and the job is retried at once
// (the backoff is 0) until it runs out of attempts.
TEST_F(DelivererTest, NackBackoffOfZeroTimesInfinityStaysValid) {
  service().Start();
  Sub sub = Subscribe("t");
  v1::RetryPolicy retry = Policy(Dur(0, 0), Dur(600, 0), /*multiplier=*/100);
  retry.set_max_attempts(200);
  MustScheduleWith("t", "a", 0, retry);
  for (uint32_t attempt = 1; attempt <= 200; ++attempt) {
    SCOPED_TRACE(absl::StrCat("attempt ", attempt));
    ASSERT_TRUE(sub.sink->WaitFor(attempt));
    const v1::Delivery delivery = sub.sink->at(attempt - 1);
    EXPECT_THAT(InvalidTimeFields(delivery), IsEmpty());
    ASSERT_EQ(delivery.attempt(), attempt);
    const int64_t now = clock_.NowMs();
    ASSERT_OK_AND_ASSIGN(v1::NackResponse r,
                         Nack(delivery.ack_token(), std::nullopt));
    EXPECT_THAT(InvalidTimeFields(r), IsEmpty());
    ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
    EXPECT_THAT(InvalidTimeFields(job), IsEmpty());
    if (attempt < 200) {
      // Due now: shown as READY.
      ASSERT_EQ(r.job().state(), v1::JOB_STATE_READY);
      ASSERT_EQ(Ms(r.job().fire_at()), now);
    } else {
      EXPECT_EQ(r.job().state(), v1::JOB_STATE_DEAD);
    }
  }
}

TEST(AckTokenTest, CarriesTheCheckAndDecodesVersion1AsNeverCurrent) {
  const AckToken token{"topic", "id", 7, 0x0123456789abcdef,
                       0xfedcba9876543210};
  ASSERT_OK_AND_ASSIGN(AckToken back, DecodeAckToken("t", EncodeAckToken(token),
                                                     kMaxTokenChars));
  EXPECT_EQ(back.topic, "topic");
  EXPECT_EQ(back.id, "id");
  EXPECT_EQ(back.attempt, 7u);
  EXPECT_EQ(back.nonce, token.nonce);
  EXPECT_EQ(back.check, token.check);
  // A version 1 token (no check) of the same delivery: check 0.
  std::string v1 = "\x01\x07";
  for (int i = 0; i < 8; ++i) {
    v1.push_back(static_cast<char>((token.nonce >> (8 * i)) & 0xff));
  }
  v1 += "\x05topicid";
  std::string text;
  absl::WebSafeBase64Escape(v1, &text);
  ASSERT_OK_AND_ASSIGN(back, DecodeAckToken("t", text, kMaxTokenChars));
  EXPECT_EQ(back.nonce, token.nonce);
  EXPECT_EQ(back.check, 0u);
  EXPECT_EQ(back.id, "id");
  // The longest token of the longest key fits the decoder's bound.
  const AckToken longest{std::string(128, 't'), std::string(256, 'i'),
                         UINT32_MAX, ~uint64_t{0}, ~uint64_t{0}};
  EXPECT_OK(DecodeAckToken("t", EncodeAckToken(longest), kMaxTokenChars));
  EXPECT_EQ(EncodeAckToken(longest).size(), 544u);
  EXPECT_LE(EncodeAckToken(longest).size(), kMaxTokenChars);
  // One character more than the bound: refused before decoding.
  EXPECT_EQ(
      DecodeAckToken("t", std::string(kMaxTokenChars + 1, 'A'), kMaxTokenChars)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// The decoder's bound on a token's length follows the limits on topics and
// ids: with --max-topic-bytes and --max-id-bytes at the largest values the
// flags allow (4096 each), a job of the longest topic and id is still acked.
// (A fixed bound of 4096 characters refused its token as forged.)
TEST_F(DelivererTest, AJobOfTheLongestTopicAndIdTheFlagsAllowIsAcked) {
  limits_.max_topic_bytes = 4096;
  limits_.max_id_bytes = 4096;
  Restart();
  service().Start();
  const std::string topic(4096, 't');
  const std::string id(4096, 'i');
  Sub sub = Subscribe(topic);
  MustSchedule(topic, id, 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  EXPECT_EQ(AckCode(sub.sink->at(0).ack_token()), absl::StatusCode::kOk);
}

// What the store, GetJob (or a predicted PRNG) tell about a delivery —
// topic, id, attempt and even its nonce — is not enough to build its token:
// the token carries 64 more bits drawn from the OS and kept only with the
// lease. (The store holds neither: a delivery writes only its attempt mark.)
TEST_F(DelivererTest, ATokenRebuiltFromTheStoredRecordIsRefused) {
  service().Start();
  Sub sub = Subscribe("t");
  MustSchedule("t", "a", 0);
  ASSERT_TRUE(sub.sink->WaitFor(1));
  const std::string token = sub.sink->at(0).ack_token();
  ASSERT_OK_AND_ASSIGN(AckToken issued,
                       DecodeAckToken("t", token, kMaxTokenChars));
  ASSERT_OK_AND_ASSIGN(v1::Job shown, service().GetJob(GetReq("t", "a")));
  AckToken rebuilt;
  rebuilt.topic = "t";
  rebuilt.id = "a";
  rebuilt.attempt = shown.attempts();
  rebuilt.nonce = issued.nonce;
  EXPECT_EQ(AckCode(EncodeAckToken(rebuilt)),
            absl::StatusCode::kFailedPrecondition);
  // Any one bit of the secret part flipped: refused.
  for (int bit = 0; bit < 64; ++bit) {
    AckToken forged = issued;
    forged.check ^= uint64_t{1} << bit;
    ASSERT_EQ(AckCode(EncodeAckToken(forged)),
              absl::StatusCode::kFailedPrecondition)
        << "bit " << bit;
    forged = issued;
    forged.nonce ^= uint64_t{1} << bit;
    ASSERT_EQ(AckCode(EncodeAckToken(forged)),
              absl::StatusCode::kFailedPrecondition)
        << "bit " << bit;
  }
  EXPECT_EQ(AckCode(token), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace delayd::server::testing
