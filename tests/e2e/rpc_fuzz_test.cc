// RpcFuzzTest: random and boundary values for every time- and size-carrying
// field of every rpc, sent to a real delayd over gRPC. Each answer must be OK,
// INVALID_ARGUMENT whose message names a field of the request, or a
// documented code (NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION); no reply
// — nor a later GetJob or ListJobs of what was stored — may carry a
// Timestamp or Duration outside protobuf's range; and the server still
// answers at the end (it never crashed).
//
// The random part uses a fixed seed, printed; DELAYD_FUZZ_SEED overrides it
// (to reproduce a failure, or to explore). Runs in a few seconds.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/delivery_fixture.h"
#include "tests/support/valid_time.h"

namespace delayd::testing {
namespace {

using google::protobuf::Duration;
using google::protobuf::Timestamp;

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
// protobuf's ranges.
constexpr int64_t kTsMin = -62135596800;   // 0001-01-01
constexpr int64_t kTsMax = 253402300799;   // 9999-12-31T23:59:59
constexpr int64_t kDurMax = 315576000000;  // 10,000 years
constexpr int64_t kHundredYears = 3155760000;

// Every field name of every request: an INVALID_ARGUMENT must name one.
const absl::flat_hash_set<std::string>& FieldNames() {
  static const auto* names =
      new absl::flat_hash_set<std::string>{"job",
                                           "topic",
                                           "id",
                                           "payload",
                                           "labels",
                                           "delay",
                                           "fire_at",
                                           "retry",
                                           "max_attempts",
                                           "lease",
                                           "initial_backoff",
                                           "max_backoff",
                                           "backoff_multiplier",
                                           "requests",
                                           "key",
                                           "id_prefix",
                                           "states",
                                           "due_after",
                                           "due_before",
                                           "page_size",
                                           "page_token",
                                           "consumer",
                                           "max_in_flight",
                                           "max_batch",
                                           "ack_tokens",
                                           "ack_token",
                                           "retry_after",
                                           "reason",
                                           "extend_by",
                                           "if_exists"};
  return *names;
}

// The field an error message starts with ("job.retry.lease: ..." ->
// "lease", "requests[3].job.labels[k]: ..." -> "labels").
std::string LeafField(const std::string& message) {
  const size_t colon = message.find(':');
  if (colon == std::string::npos) return "";
  std::string path = message.substr(0, colon);
  const size_t bracket = path.find('[', path.rfind('.') + 1);
  if (bracket != std::string::npos) path.resize(bracket);
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

class RpcFuzzTest : public DeliveryTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DeliveryTest::SetUp());
    stub_ = v1::DelayQueue::NewStub(server_->NewChannel());
    uint64_t seed = 17;
    if (const char* env = std::getenv("DELAYD_FUZZ_SEED"); env != nullptr) {
      ASSERT_TRUE(absl::SimpleAtoi(env, &seed)) << "DELAYD_FUZZ_SEED=" << env;
    }
    std::cout << "RpcFuzzTest seed " << seed
              << " (set DELAYD_FUZZ_SEED to change it)" << std::endl;
    RecordProperty("seed", std::to_string(seed));
    rng_.seed(seed);
    now_s_ = absl::ToUnixSeconds(absl::Now());
  }

  // Checks one answer: an allowed code, a named field when refused, and no
  // invalid time in the response.
  void Check(const std::string& what, const grpc::Status& status,
             const google::protobuf::Message& response,
             std::vector<grpc::StatusCode> also_allowed = {}) {
    ++calls_;
    if (status.ok()) {
      EXPECT_THAT(InvalidTimeFields(response), ::testing::IsEmpty())
          << what << " answered OK with an invalid time";
      return;
    }
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      EXPECT_TRUE(FieldNames().contains(LeafField(status.error_message())))
          << what
          << ": INVALID_ARGUMENT naming no field: " << status.error_message();
      return;
    }
    EXPECT_THAT(also_allowed, ::testing::Contains(status.error_code()))
        << what << ": code " << status.error_code() << ": "
        << status.error_message();
  }

  template <typename Request, typename Response>
  Reply<Response> Call(grpc::Status (v1::DelayQueue::Stub::*rpc)(
                           grpc::ClientContext*, const Request&, Response*),
                       const Request& request) {
    return UnaryCall(*stub_, rpc, request);
  }

  int64_t Pick(const std::vector<int64_t>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }
  bool Coin(int one_in = 2) {
    return std::uniform_int_distribution<int>(0, one_in - 1)(rng_) == 0;
  }

  // Seconds: boundaries of int64, of Timestamp and Duration, and around now
  // and the schedule-ahead limit; else random.
  int64_t Seconds() {
    if (Coin(4)) {
      return std::uniform_int_distribution<int64_t>(kI64Min, kI64Max)(rng_);
    }
    return Pick({0,
                 1,
                 -1,
                 kI64Min,
                 kI64Max,
                 kTsMin,
                 kTsMin - 1,
                 kTsMax,
                 kTsMax + 1,
                 kDurMax,
                 kDurMax + 1,
                 -kDurMax,
                 -kDurMax - 1,
                 9223372036854776,   // * 1000 wraps negative
                 18446744073709552,  // * 1000 wraps to 384 ms
                 kI64Max / 1000,
                 kI64Max / 1000 + 1,
                 now_s_,
                 now_s_ + 60,
                 now_s_ - 60,
                 now_s_ + kHundredYears - 1,
                 now_s_ + kHundredYears + 1,
                 43200,  // 12 h (max lease)
                 43201,
                 std::uniform_int_distribution<int64_t>(-1000, 100000)(rng_)});
  }
  int32_t Nanos() {
    if (Coin(4)) {
      return std::uniform_int_distribution<int32_t>(kI32Min, kI32Max)(rng_);
    }
    return static_cast<int32_t>(
        Pick({0, 1, -1, 999'999'999, 1'000'000'000, -999'999'999,
              -1'000'000'000, kI32Min, kI32Max, 999'999, 1'000'000}));
  }
  Duration RandomDuration() {
    Duration d;
    d.set_seconds(Seconds());
    d.set_nanos(Nanos());
    return d;
  }
  Timestamp RandomTimestamp() {
    Timestamp t;
    t.set_seconds(Seconds());
    t.set_nanos(Nanos());
    return t;
  }
  // Byte strings at, below and past a size limit.
  std::string Sized(size_t limit, char c = 'x') {
    const int64_t n =
        Pick({0, 1, static_cast<int64_t>(limit) - 1,
              static_cast<int64_t>(limit), static_cast<int64_t>(limit) + 1});
    return std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), c);
  }
  double Multiplier() {
    return static_cast<double>(Pick({0, 1, 2, 100, 101, -1})) +
           (Coin(3) ? std::numeric_limits<double>::quiet_NaN() : 0) +
           (Coin(5) ? std::numeric_limits<double>::infinity() : 0) +
           (Coin(3) ? 0.5 : 0);
  }

  v1::RetryPolicy RandomRetry() {
    v1::RetryPolicy r;
    if (Coin()) {
      r.set_max_attempts(static_cast<uint32_t>(Pick(
          {0, 1, 2, 999, 1000, 1001, std::numeric_limits<uint32_t>::max()})));
    }
    if (Coin()) *r.mutable_lease() = RandomDuration();
    if (Coin()) *r.mutable_initial_backoff() = RandomDuration();
    if (Coin()) *r.mutable_max_backoff() = RandomDuration();
    if (Coin()) r.set_backoff_multiplier(Multiplier());
    return r;
  }

  v1::JobSpec RandomSpec(const std::string& id) {
    v1::JobSpec spec;
    spec.set_topic(Coin(4) ? Sized(128, 't') : "fuzz");
    spec.set_id(Coin(4) ? Sized(256, 'i') + id : id);
    if (Coin(4)) spec.set_payload(Sized(1 << 20));
    if (Coin(4)) {
      const int n = static_cast<int>(Pick({0, 1, 32, 33}));
      const std::string key = Coin() ? Sized(64, 'k') : "k";
      for (int i = 0; i < n; ++i) {
        (*spec.mutable_labels())[absl::StrCat(key, i)] =
            Coin() ? Sized(256, 'v') : "v";
      }
    }
    switch (std::uniform_int_distribution<int>(0, 2)(rng_)) {
      case 0:
        *spec.mutable_delay() = RandomDuration();
        break;
      case 1:
        *spec.mutable_fire_at() = RandomTimestamp();
        break;
      default:
        break;
    }
    if (Coin()) *spec.mutable_retry() = RandomRetry();
    return spec;
  }

  // The ack token of a delivery of a new job of `topic`, due now.
  std::string Deliver(TestSubscriber& sub, const std::string& topic,
                      const v1::RetryPolicy& retry) {
    const std::string id = absl::StrCat("d", next_id_++);
    v1::JobSpec spec = Spec(topic, id, absl::ZeroDuration(), "p");
    *spec.mutable_retry() = retry;
    MustSchedule(spec);
    std::string token;
    EXPECT_TRUE(Eventually([&] {
      for (const Received& r : sub.received()) {
        if (r.delivery.job().id() == id) token = r.delivery.ack_token();
      }
      return !token.empty();
    })) << "no delivery of "
        << id;
    return token;
  }

  // Every stored job, through GetJob and ListJobs, carries valid times.
  void CheckStored() {
    v1::GetStatsRequest all;
    auto stats = Call(&v1::DelayQueue::Stub::GetStats, all);
    ASSERT_RPC_OK(stats) << "the server no longer answers";
    for (const v1::TopicStats& topic : stats.response.topics()) {
      v1::ListJobsRequest query;
      query.set_topic(topic.topic());
      query.set_page_size(1000);
      for (const v1::Job& job : client_->ListAll(query)) {
        EXPECT_THAT(InvalidTimeFields(job), ::testing::IsEmpty())
            << "ListJobs " << job.topic() << "/" << job.id();
        v1::GetJobRequest get;
        *get.mutable_key()->mutable_topic() = job.topic();
        *get.mutable_key()->mutable_id() = job.id();
        auto got = Call(&v1::DelayQueue::Stub::GetJob, get);
        EXPECT_RPC_OK(got);
        EXPECT_THAT(InvalidTimeFields(got.response), ::testing::IsEmpty())
            << "GetJob " << job.topic() << "/" << job.id();
      }
    }
  }

  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  std::mt19937_64 rng_;
  int64_t now_s_ = 0;
  int next_id_ = 0;
  int calls_ = 0;
};

TEST_F(RpcFuzzTest, SchedulingRpcsAnswerOkOrNameTheFieldAndStoreValidTimes) {
  const std::vector<grpc::StatusCode> exists = {
      grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::NOT_FOUND};
  for (int i = 0; i < 400; ++i) {
    v1::ScheduleRequest req;
    *req.mutable_job() = RandomSpec(absl::StrCat("s", i));
    req.set_if_exists(Coin() ? v1::IF_EXISTS_REPLACE : v1::IF_EXISTS_FAIL);
    auto r = Call(&v1::DelayQueue::Stub::Schedule, req);
    Check(absl::StrCat("Schedule ", req.ShortDebugString().substr(0, 300)),
          r.status, r.response, exists);
  }
  for (int64_t n : {0, 1, 1000, 1001}) {
    v1::ScheduleBatchRequest batch;
    for (int64_t i = 0; i < n; ++i) {
      v1::ScheduleRequest* req = batch.add_requests();
      *req->mutable_job() = RandomSpec(absl::StrCat("b", n, "-", i));
      if (i > 0) {  // stay under gRPC's 4 MiB message limit
        req->mutable_job()->clear_payload();
        req->mutable_job()->clear_labels();
      }
    }
    auto r = Call(&v1::DelayQueue::Stub::ScheduleBatch, batch);
    Check(absl::StrCat("ScheduleBatch of ", n), r.status, r.response, exists);
    for (const v1::ScheduleResult& result : r.response.results()) {
      if (result.code() == grpc::StatusCode::INVALID_ARGUMENT) {
        EXPECT_TRUE(FieldNames().contains(LeafField(result.message())))
            << result.message();
      } else {
        EXPECT_THAT(result.code(), ::testing::AnyOf(0, 6)) << result.message();
      }
    }
  }
  for (int i = 0; i < 300; ++i) {
    v1::RescheduleRequest req;
    req.mutable_key()->set_topic("fuzz");
    req.mutable_key()->set_id(absl::StrCat("s", i % 400));
    if (Coin()) {
      *req.mutable_delay() = RandomDuration();
    } else {
      *req.mutable_fire_at() = RandomTimestamp();
    }
    auto r = Call(&v1::DelayQueue::Stub::Reschedule, req);
    Check(absl::StrCat("Reschedule ", req.ShortDebugString()), r.status,
          r.response,
          {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::FAILED_PRECONDITION});
  }
  for (int i = 0; i < 100; ++i) {
    v1::ListJobsRequest req;
    req.set_topic(Coin(4) ? Sized(128, 't') : "fuzz");
    if (Coin(4)) req.set_id_prefix(Sized(256, 's'));
    req.set_page_size(static_cast<uint32_t>(
        Pick({0, 1, 999, 1000, 1001, std::numeric_limits<uint32_t>::max()})));
    if (Coin()) *req.mutable_due_after() = RandomTimestamp();
    if (Coin()) *req.mutable_due_before() = RandomTimestamp();
    auto r = Call(&v1::DelayQueue::Stub::ListJobs, req);
    Check(absl::StrCat("ListJobs ", req.ShortDebugString()), r.status,
          r.response);
  }
  for (int i = 0; i < 40; ++i) {
    const std::string topic = Coin() ? Sized(128, 't') : "fuzz";
    const std::string id = Coin() ? Sized(256, 's') : absl::StrCat("s", i);
    v1::GetJobRequest get;
    get.mutable_key()->set_topic(topic);
    get.mutable_key()->set_id(id);
    auto g = Call(&v1::DelayQueue::Stub::GetJob, get);
    Check("GetJob", g.status, g.response, {grpc::StatusCode::NOT_FOUND});
    v1::GetStatsRequest stats;
    stats.set_topic(topic);
    auto s = Call(&v1::DelayQueue::Stub::GetStats, stats);
    Check("GetStats", s.status, s.response);
    v1::CancelRequest cancel;
    *cancel.mutable_key() = get.key();
    auto c = Call(&v1::DelayQueue::Stub::Cancel, cancel);
    Check("Cancel", c.status, c.response, {grpc::StatusCode::NOT_FOUND});
    v1::CancelByPrefixRequest by_prefix;
    by_prefix.set_topic(topic);
    by_prefix.set_id_prefix(Coin() ? id : Sized(256, 'z'));
    auto p = Call(&v1::DelayQueue::Stub::CancelByPrefix, by_prefix);
    Check("CancelByPrefix", p.status, p.response);
    v1::RedriveRequest redrive;
    redrive.set_topic(topic);
    redrive.set_id_prefix(by_prefix.id_prefix());
    auto d = Call(&v1::DelayQueue::Stub::Redrive, redrive);
    Check("Redrive", d.status, d.response);
  }
  ASSERT_NO_FATAL_FAILURE(CheckStored());
  std::cout << calls_ << " calls" << std::endl;
}

TEST_F(RpcFuzzTest, DeliveryRpcsAnswerOkOrNameTheFieldAndStoreValidTimes) {
  // Each boundary value as max_in_flight, then as max_batch.
  for (int64_t value : std::vector<int64_t>{
           0, 1, 10000, 10001, std::numeric_limits<uint32_t>::max()}) {
    const auto v = static_cast<uint32_t>(value);
    const std::string topic = Coin() ? "fuzz" : Sized(128, 't');
    for (const auto& [field, max_in_flight, max_batch] :
         {std::tuple{"max_in_flight", v, 0u},
          std::tuple{"max_batch", 10u, v}}) {
      TestSubscriber sub(server_->NewChannel(), topic, max_in_flight,
                         /*auto_ack=*/false, max_batch);
      const std::optional<grpc::Status> end =
          sub.WaitEnd(absl::Milliseconds(100));
      if (end.has_value()) {
        Check(absl::StrCat("Subscribe ", field, " ", value), *end,
              v1::Delivery());
      }
    }
  }
  for (int n : {0, 1, 1000, 1001}) {
    v1::AckRequest ack;
    for (int i = 0; i < n; ++i) ack.add_ack_tokens(Sized(100, 'a'));
    auto r = Call(&v1::DelayQueue::Stub::Ack, ack);
    Check(absl::StrCat("Ack of ", n), r.status, r.response);
  }

  TestSubscriber& sub = Subscribe("deliver", 1000);
  v1::RetryPolicy long_lease;
  long_lease.mutable_lease()->set_seconds(43200);
  std::string token = Deliver(sub, "deliver", long_lease);
  for (int i = 0; i < 300; ++i) {
    v1::ExtendLeaseRequest extend;
    extend.set_ack_token(token);
    if (!Coin(8)) *extend.mutable_extend_by() = RandomDuration();
    const absl::Time before = absl::Now();
    auto r = Call(&v1::DelayQueue::Stub::ExtendLease, extend);
    const std::string what =
        absl::StrCat("ExtendLease ", extend.extend_by().ShortDebugString());
    Check(what, r.status, r.response, {grpc::StatusCode::FAILED_PRECONDITION});
    if (r.ok()) {
      // Never shorter than asked (a wrapped product would be).
      EXPECT_GE(FromProto(r.response.lease_expires_at()),
                before + FromProto(extend.extend_by()) - absl::Milliseconds(1))
          << what << " answered "
          << r.response.lease_expires_at().ShortDebugString();
    }
    if (!r.ok() && r.status.error_code() != grpc::INVALID_ARGUMENT) {
      token = Deliver(sub, "deliver", long_lease);  // that lease ended
    }
  }
  for (int i = 0; i < 200; ++i) {
    v1::NackRequest nack;
    nack.set_ack_token(token);
    if (!Coin(8)) *nack.mutable_retry_after() = RandomDuration();
    nack.set_reason(Sized(1024, 'r'));
    const absl::Time before = absl::Now();
    auto r = Call(&v1::DelayQueue::Stub::Nack, nack);
    const std::string what =
        absl::StrCat("Nack ", nack.retry_after().ShortDebugString());
    Check(what, r.status, r.response, {grpc::StatusCode::FAILED_PRECONDITION});
    if (r.ok() && nack.has_retry_after()) {
      EXPECT_GE(FromProto(r.response.job().fire_at()),
                before + FromProto(nack.retry_after()) - absl::Milliseconds(1))
          << what << " answered " << r.response.job().ShortDebugString();
    }
    if (r.status.error_code() != grpc::INVALID_ARGUMENT) {
      token = Deliver(sub, "deliver", long_lease);
    }
  }

  // NaN-producing backoff: initial_backoff 0, multiplier 100 (100^155
  // overflows a double from attempt 156 on), so 0 * inf; max_attempts 1000.
  v1::RetryPolicy nan;
  nan.set_max_attempts(1000);
  nan.mutable_lease()->set_seconds(43200);
  nan.mutable_initial_backoff()->set_seconds(0);
  nan.set_backoff_multiplier(100);
  TestSubscriber& nan_sub = Subscribe("nan", 1);
  token = Deliver(nan_sub, "nan", nan);
  for (uint32_t attempt = 1; attempt <= 160; ++attempt) {
    v1::NackRequest nack;
    nack.set_ack_token(token);
    auto r = Call(&v1::DelayQueue::Stub::Nack, nack);
    Check(absl::StrCat("Nack (backoff) of attempt ", attempt), r.status,
          r.response);
    if (!r.ok() || r.response.job().state() != v1::JOB_STATE_SCHEDULED) break;
    if (!nan_sub.WaitFor(attempt + 1, absl::Seconds(5))) {
      ADD_FAILURE() << "attempt " << attempt + 1 << " never came; the job: "
                    << r.response.job().ShortDebugString();
      break;
    }
    const v1::Delivery next = nan_sub.at(attempt).delivery;
    EXPECT_THAT(InvalidTimeFields(next), ::testing::IsEmpty())
        << "Delivery of attempt " << attempt + 1;
    token = next.ack_token();
  }
  ASSERT_NO_FATAL_FAILURE(CheckStored());
  std::cout << calls_ << " calls" << std::endl;
}

}  // namespace
}  // namespace delayd::testing
