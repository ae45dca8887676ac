// End to end: every refusal of the limits table in DESIGN.md, against the
// real binary over gRPC. After each refusal: the status code is right, the
// message names the field and the limit, nothing the server shows changed
// (GetStats of every topic and every job, payloads included), and the
// server still serves (a following Schedule works).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/scheduling_client.h"
#include "tests/support/server_process.h"
#include "tests/support/status_matchers.h"

namespace delayd::testing {
namespace {

constexpr size_t kMiB = 1 << 20;
// google.protobuf.Timestamp's lowest valid second: 0001-01-01T00:00:00Z.
constexpr int64_t kYearOneSeconds = -62135596800;
// The limit on fire_at and delay as the server prints it: 100 years.
constexpr char kHundredYears[] = "100 years";

class RefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, DelaydProcess::Start());
    client_ = std::make_unique<SchedulingClient>(server_->NewChannel());
    // Something to compare: jobs in several states and horizons.
    for (const auto& [id, delay] :
         std::vector<std::pair<std::string, absl::Duration>>{
             {"ready", absl::ZeroDuration()},
             {"10m", absl::Minutes(10)},
             {"2h", absl::Hours(2)},
             {"2d", absl::Hours(48)}}) {
      ASSERT_RPC_OK(
          client_->Schedule(Request(Spec("seed", id, delay, "seed " + id))));
    }
    ASSERT_RPC_OK(client_->Schedule(
        Request(Spec("orders.close", "order-1", absl::Hours(1), "p"))));
    ASSERT_TRUE(
        Eventually([&] { return client_->StatsOf("seed").ready() == 1; }));
  }

  // Runs `call` and checks the refusal as the file comment says.
  void ExpectRefused(const std::function<grpc::Status()>& call,
                     grpc::StatusCode code,
                     const std::vector<std::string>& parts) {
    const std::string before = client_->Snapshot();
    const grpc::Status status = call();
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    for (const std::string& part : parts) {
      EXPECT_NE(status.error_message().find(part), std::string::npos)
          << "message \"" << status.error_message().substr(0, 300)
          << "\" lacks \"" << absl::CHexEscape(part) << "\"";
    }
    EXPECT_EQ(client_->Snapshot(), before);
    auto probe = client_->Schedule(Request(Spec("probe", "", absl::Hours(1))));
    EXPECT_RPC_OK(probe);
  }

  // A Schedule of `spec` refused with INVALID_ARGUMENT naming `parts`.
  void ExpectScheduleRefused(const v1::JobSpec& spec,
                             const std::vector<std::string>& parts,
                             v1::IfExists if_exists = v1::IF_EXISTS_FAIL) {
    SCOPED_TRACE(absl::CHexEscape(spec.ShortDebugString().substr(0, 200)));
    ExpectRefused(
        [&] { return client_->Schedule(Request(spec, if_exists)).status; },
        grpc::StatusCode::INVALID_ARGUMENT, parts);
  }

  void ExpectScheduleAccepted(const v1::JobSpec& spec) {
    SCOPED_TRACE(absl::CHexEscape(spec.ShortDebugString().substr(0, 200)));
    auto reply = client_->Schedule(Request(spec));
    ASSERT_RPC_OK(reply);
    EXPECT_TRUE(reply.response.created());
    auto got = client_->GetJob(spec.topic(), reply.response.job().id());
    ASSERT_RPC_OK(got);
    EXPECT_EQ(got.response.payload(), spec.payload());
  }

  std::unique_ptr<DelaydProcess> server_;
  std::unique_ptr<SchedulingClient> client_;
};

TEST_F(RefusalTest, Topic) {
  ExpectScheduleRefused(Spec("", "x"), {"job.topic", "1-128", "got 0 bytes"});
  ExpectScheduleRefused(Spec(std::string(129, 'a'), "x"),
                        {"job.topic", "1-128", "got 129 bytes"});
  ExpectScheduleRefused(Spec(std::string(kMiB, 'a'), "x"),
                        {"job.topic", "1-128", "got 1048576 bytes"});
  for (const std::string& bad :
       {std::string("orders close"), std::string("orders/close"),
        std::string("orders\tclose"), std::string("ord\xc3\xa9rs"),
        std::string("a*b"), std::string("a\0b", 3)}) {
    ExpectScheduleRefused(Spec(bad, "x"), {"job.topic", "[A-Za-z0-9._:-]"});
  }
  ExpectScheduleAccepted(Spec(std::string(128, 'a'), "x"));
  ExpectScheduleAccepted(Spec("AZaz09._:-", "x"));

  // Every rpc that takes a topic names its own field.
  const std::string bad = "no spaces";
  ExpectRefused([&] { return client_->GetJob(bad, "x").status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.topic", "1-128"});
  ExpectRefused([&] { return client_->Cancel("", "x").status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.topic", "1-128"});
  ExpectRefused([&] { return client_->CancelByPrefix(bad, "").status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"topic", "1-128"});
  ExpectRefused([&] { return client_->GetStats(bad).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"topic", "1-128"});
  ExpectRefused(
      [&] {
        v1::ListJobsRequest query;  // topic is required
        return client_->ListJobs(query).status;
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"topic", "1-128"});
  ExpectRefused(
      [&] {
        v1::RescheduleRequest request;
        request.mutable_key()->set_topic(std::string(129, 'a'));
        return client_->Reschedule(request).status;
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"key.topic", "1-128"});
}

TEST_F(RefusalTest, IdLength) {
  ExpectScheduleRefused(Spec("t", std::string(257, 'i')),
                        {"job.id", "at most 256 bytes", "got 257"});
  ExpectScheduleRefused(Spec("t", std::string(kMiB, 'i')),
                        {"job.id", "at most 256 bytes", "got 1048576"});
  ExpectScheduleAccepted(Spec("t", std::string(256, 'i')));
  std::string e_acute;  // 256 bytes of two-byte characters
  for (int i = 0; i < 128; ++i) e_acute += "\xc3\xa9";
  ExpectScheduleAccepted(Spec("t", e_acute));
  ExpectScheduleRefused(Spec("t", e_acute + "x"), {"job.id", "256", "257"});

  const std::string long_id(257, 'i');
  ExpectRefused([&] { return client_->GetJob("t", long_id).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.id", "256"});
  ExpectRefused([&] { return client_->Cancel("t", long_id).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.id", "256"});
  ExpectRefused([&] { return client_->CancelByPrefix("t", long_id).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"id_prefix", "256"});
  ExpectRefused(
      [&] {
        v1::ListJobsRequest query;
        query.set_topic("t");
        query.set_id_prefix(long_id);
        return client_->ListJobs(query).status;
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"id_prefix", "256"});
}

TEST_F(RefusalTest, IdControlCharacters) {
  for (const std::string& bad :
       {std::string("a\nb"), std::string("a\tb"), std::string("\x01"),
        std::string("a\x7f"), std::string("a\0b", 3),
        std::string("\xc2\x85") /* U+0085, a C1 control */}) {
    ExpectScheduleRefused(Spec("t", bad),
                          {"job.id", "UTF-8 without control characters"});
  }
  ExpectRefused([&] { return client_->Cancel("t", "a\nb").status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.id", "control"});
  // Not control characters: spaces, punctuation, other scripts, emoji.
  ExpectScheduleAccepted(Spec("t", "order 8812/close #1"));
  ExpectScheduleAccepted(
      Spec("t", "\xe8\xa8\x82\xe5\x96\xae-\xf0\x9f\x93\xa6"));
}

// Ill-formed UTF-8 in the proto3 string fields. protobuf-cpp's serializer
// only logs about it, so a C++ client does send these bytes; the contract
// says INVALID_ARGUMENT naming the field, like any other bad id.
TEST_F(RefusalTest, InvalidUtf8InStringFields) {
  for (const std::string& bad :
       {std::string("\xff"), std::string("a\xc0\x80"),  // overlong NUL
        std::string("\xed\xa0\x80"),                    // a surrogate
        std::string("\xe2\x82"),                        // truncated
        std::string("\xf4\x90\x80\x80")}) {             // above U+10FFFF
    ExpectScheduleRefused(Spec("t", bad), {"job.id", "UTF-8"});
  }
  ExpectScheduleRefused(Spec("\xff", "x"), {"job.topic"});
  ExpectRefused([&] { return client_->GetJob("t", "\xff").status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"key.id", "UTF-8"});
  ExpectRefused(
      [&] {
        v1::ListJobsRequest query;
        query.set_topic("seed");
        query.set_page_token(std::string("\xff\xfe", 2));
        return client_->ListJobs(query).status;
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"page_token"});
}

TEST_F(RefusalTest, Payload) {
  ExpectScheduleAccepted(
      Spec("t", "exactly-1MiB", absl::Hours(1), std::string(kMiB, 'p')));
  ExpectScheduleRefused(
      Spec("t", "over", absl::Hours(1), std::string(kMiB + 1, 'p')),
      {"job.payload", "at most 1048576 bytes", "got 1048577"});
  ExpectScheduleRefused(
      Spec("t", "3MiB", absl::Hours(1), std::string(3 * kMiB, 'p')),
      {"job.payload", "at most 1048576 bytes", "got 3145728"});
}

// The server takes requests of up to 16 MiB, so an oversized field up to
// there is refused by delayd, naming it; beyond, gRPC's transport refuses
// with RESOURCE_EXHAUSTED naming its own limit.
TEST_F(RefusalTest, HugeMessages) {
  ExpectScheduleRefused(
      Spec("t", "5MiB", absl::Hours(1), std::string(5 * kMiB, 'p')),
      {"job.payload", "at most 1048576 bytes", "got 5242880"});
  ExpectScheduleRefused(Spec("t", std::string(5 * kMiB, 'i')),
                        {"job.id", "at most 256 bytes", "got 5242880"});
  ExpectRefused(
      [&] {
        return client_
            ->Schedule(Request(Spec("t", "17MiB", absl::Hours(1),
                                    std::string(17 * kMiB, 'p'))))
            .status;
      },
      grpc::StatusCode::RESOURCE_EXHAUSTED, {"16777216"});
}

// A ScheduleBatch reply echoes every job, payload included, and must fit
// the 4 MiB a gRPC client receives by default: a batch whose reply would not
// is refused before anything is written (not written and then lost on the
// way back).
TEST_F(RefusalTest, BatchWhoseReplyWouldExceedFourMiB) {
  v1::ScheduleBatchRequest four;
  for (int i = 0; i < 4; ++i) {
    *four.add_requests() =
        Request(Spec("fat", absl::StrCat("big-", i), absl::Hours(1),
                     std::string(kMiB, 'p')));
  }
  ExpectRefused([&] { return client_->ScheduleBatch(four).status; },
                grpc::StatusCode::INVALID_ARGUMENT,
                {"requests", "reply", "4194304"});
  // Also when the request itself is under 4 MiB.
  v1::ScheduleBatchRequest many;
  for (int i = 0; i < 1000; ++i) {
    *many.add_requests() =
        Request(Spec("fat", absl::StrFormat("f-%04d", i), absl::Hours(1),
                     std::string(4150, 'p')));
  }
  ASSERT_LT(many.ByteSizeLong(), 4u * kMiB);
  ExpectRefused([&] { return client_->ScheduleBatch(many).status; },
                grpc::StatusCode::INVALID_ARGUMENT,
                {"requests", "reply", "4194304"});
  // Three of 1 MiB fit.
  four.mutable_requests()->RemoveLast();
  auto three = client_->ScheduleBatch(four);
  ASSERT_RPC_OK(three);
  for (const v1::ScheduleResult& result : three.response.results()) {
    EXPECT_EQ(result.code(), 0) << result.message();
    EXPECT_EQ(result.job().payload().size(), kMiB);
  }
}

// ListJobs with payloads: a page ends early rather than outgrow what a
// client receives by default.
TEST_F(RefusalTest, ListJobsPagesFitTheReceiveLimit) {
  for (int i = 0; i < 6; ++i) {
    ASSERT_RPC_OK(client_->Schedule(
        Request(Spec("fat", absl::StrCat("f-", i), absl::Hours(1),
                     std::string(kMiB, 'p')))));
  }
  v1::ListJobsRequest query;
  query.set_topic("fat");
  query.set_include_payload(true);
  query.set_page_size(1000);
  const std::vector<v1::Job> jobs = client_->ListAll(query);
  ASSERT_EQ(jobs.size(), 6u);
  for (const v1::Job& job : jobs) EXPECT_EQ(job.payload().size(), kMiB);
}

TEST_F(RefusalTest, Delay) {
  auto with_delay = [](int64_t seconds, int32_t nanos) {
    v1::JobSpec spec = Spec("t", "d");
    spec.mutable_delay()->set_seconds(seconds);
    spec.mutable_delay()->set_nanos(nanos);
    return spec;
  };
  ExpectScheduleRefused(with_delay(-1, 0), {"job.delay", ">= 0"});
  ExpectScheduleRefused(with_delay(0, -1), {"job.delay", ">= 0"});
  ExpectScheduleRefused(with_delay(1, -1),
                        {"job.delay", "not a valid Duration"});
  ExpectScheduleRefused(with_delay(0, 1'000'000'000),
                        {"job.delay", "not a valid Duration"});
  ExpectScheduleRefused(with_delay(315576000001, 0),
                        {"job.delay", "not a valid Duration"});
  ExpectScheduleRefused(Spec("t", "d", absl::Hours(24 * (36525 + 1))),
                        {"job.delay", "at most", kHundredYears});
  ExpectScheduleAccepted(Spec("t", "99y", absl::Hours(24 * 365 * 99)));

  v1::RescheduleRequest request;
  request.mutable_key()->set_topic("orders.close");
  request.mutable_key()->set_id("order-1");
  request.mutable_delay()->set_seconds(-5);
  ExpectRefused([&] { return client_->Reschedule(request).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"delay", ">= 0"});
}

TEST_F(RefusalTest, FireAt) {
  auto at = [](int64_t seconds, int32_t nanos) {
    v1::JobSpec spec = Spec("t", "f");
    spec.mutable_fire_at()->set_seconds(seconds);
    spec.mutable_fire_at()->set_nanos(nanos);
    return spec;
  };
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  const int64_t hundred_years = int64_t{36525} * 86400;
  ExpectScheduleRefused(at(now + hundred_years + 86400, 0),
                        {"job.fire_at", "at most", kHundredYears, "ahead"});
  ExpectScheduleRefused(at(253402300799, 0),  // 9999-12-31: valid, too far
                        {"job.fire_at", "at most", kHundredYears});
  ExpectScheduleAccepted(at(now + hundred_years - 86400, 0));
  // Not a valid Timestamp at all.
  for (const auto& [seconds, nanos] :
       std::vector<std::pair<int64_t, int32_t>>{{kYearOneSeconds - 1, 0},
                                                {-(int64_t{1} << 62), 0},
                                                {253402300800, 0},
                                                {now, -1},
                                                {now, 1'000'000'000}}) {
    ExpectScheduleRefused(at(seconds, nanos),
                          {"job.fire_at", "not a valid Timestamp"});
  }

  v1::RescheduleRequest request;
  request.mutable_key()->set_topic("orders.close");
  request.mutable_key()->set_id("order-1");
  request.mutable_fire_at()->set_seconds(now + 2 * hundred_years);
  ExpectRefused([&] { return client_->Reschedule(request).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"fire_at", kHundredYears});
}

TEST_F(RefusalTest, FireAtInThePastFiresNow) {
  for (const auto& [id, seconds] : std::vector<std::pair<std::string, int64_t>>{
           {"year-1", kYearOneSeconds},
           {"1969", -1},
           {"epoch", 0},
           {"an-hour-ago", absl::ToUnixSeconds(absl::Now()) - 3600}}) {
    SCOPED_TRACE(id);
    v1::JobSpec spec = Spec("past", id);
    spec.mutable_fire_at()->set_seconds(seconds);
    auto reply = client_->Schedule(Request(spec));
    ASSERT_RPC_OK(reply);
    EXPECT_EQ(reply.response.job().state(), v1::JOB_STATE_READY);
    EXPECT_LE(FromProto(reply.response.job().fire_at()), absl::Now());
  }
  EXPECT_TRUE(
      Eventually([&] { return client_->StatsOf("past").ready() == 4; }));
  EXPECT_EQ(client_->StatsOf("past").scheduled(), 0u);
}

TEST_F(RefusalTest, Batch) {
  ExpectRefused(
      [&] { return client_->ScheduleBatch(v1::ScheduleBatchRequest()).status; },
      grpc::StatusCode::INVALID_ARGUMENT, {"requests", "1-1000", "got 0"});
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 1001; ++i) {
    *batch.add_requests() = Request(Spec("t", absl::StrCat("b-", i)));
  }
  ExpectRefused([&] { return client_->ScheduleBatch(batch).status; },
                grpc::StatusCode::INVALID_ARGUMENT,
                {"requests", "1-1000", "got 1001"});
}

// Within a batch each request is refused on its own, naming its index; the
// others are written.
TEST_F(RefusalTest, BatchRefusesRequestsOneByOne) {
  v1::ScheduleBatchRequest batch;
  *batch.add_requests() = Request(Spec("t", "ok-0"));
  *batch.add_requests() =
      Request(Spec("t", "big", absl::Hours(1), std::string(kMiB + 1, 'p')));
  *batch.add_requests() = Request(Spec("bad topic", "x"));
  *batch.add_requests() = Request(Spec("t", "ok-0"));  // same job as [0]
  *batch.add_requests() =
      Request(Spec("t", "e", absl::Hours(1)), static_cast<v1::IfExists>(9));
  *batch.add_requests() =
      Request(Spec("orders.close", "order-1", absl::Hours(1), "different"));
  *batch.add_requests() = Request(Spec("t", "ok-6"));
  auto reply = client_->ScheduleBatch(batch);
  ASSERT_RPC_OK(reply);
  ASSERT_EQ(reply.response.results_size(), 7);
  const auto& r = reply.response.results();
  EXPECT_EQ(r[0].code(), 0);
  EXPECT_EQ(r[1].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r[1].message().find("requests[1].job.payload"), std::string::npos)
      << r[1].message();
  EXPECT_EQ(r[2].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r[2].message().find("requests[2].job.topic"), std::string::npos)
      << r[2].message();
  EXPECT_EQ(r[3].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r[3].message().find("requests[0]"), std::string::npos)
      << r[3].message();
  EXPECT_EQ(r[4].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r[4].message().find("requests[4].if_exists"), std::string::npos)
      << r[4].message();
  EXPECT_EQ(r[5].code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(r[6].code(), 0);
  for (int i : {1, 2, 3, 4, 5}) EXPECT_FALSE(r[i].has_job()) << i;
  v1::ListJobsRequest query;
  query.set_topic("t");
  std::vector<std::string> ids;
  for (const v1::Job& job : client_->ListAll(query)) ids.push_back(job.id());
  EXPECT_EQ(ids, (std::vector<std::string>{"ok-0", "ok-6"}));
  auto kept = client_->GetJob("orders.close", "order-1");
  ASSERT_RPC_OK(kept);
  EXPECT_EQ(kept.response.payload(), "p");
}

TEST_F(RefusalTest, UnknownIfExistsValue) {
  for (int value : {4, 7, -1}) {
    SCOPED_TRACE(value);
    ExpectScheduleRefused(Spec("t", "x"),
                          {"if_exists", "unknown value", absl::StrCat(value)},
                          static_cast<v1::IfExists>(value));
  }
}

TEST_F(RefusalTest, LabelsAndRetry) {
  v1::JobSpec many = Spec("t", "x");
  for (int i = 0; i < 33; ++i) {
    many.mutable_labels()->insert({absl::StrCat("k", i), "v"});
  }
  ExpectScheduleRefused(many, {"job.labels", "32"});
  v1::JobSpec long_key = Spec("t", "x");
  (*long_key.mutable_labels())[std::string(65, 'k')] = "v";
  ExpectScheduleRefused(long_key, {"job.labels", "64"});
  v1::JobSpec long_value = Spec("t", "x");
  (*long_value.mutable_labels())["k"] = std::string(257, 'v');
  ExpectScheduleRefused(long_value, {"job.labels[k]", "256"});
  v1::JobSpec attempts = Spec("t", "x");
  attempts.mutable_retry()->set_max_attempts(1001);
  ExpectScheduleRefused(attempts, {"job.retry.max_attempts", "1000"});
  v1::JobSpec lease = Spec("t", "x");
  *lease.mutable_retry()->mutable_lease() = ToProto(absl::Hours(13));
  ExpectScheduleRefused(lease, {"job.retry.lease", "12h"});
  v1::JobSpec multiplier = Spec("t", "x");
  multiplier.mutable_retry()->set_backoff_multiplier(0.5);
  ExpectScheduleRefused(multiplier, {"job.retry.backoff_multiplier"});
}

TEST_F(RefusalTest, PageSizeAndStates) {
  v1::ListJobsRequest query;
  query.set_topic("seed");
  query.set_page_size(1001);
  ExpectRefused([&] { return client_->ListJobs(query).status; },
                grpc::StatusCode::INVALID_ARGUMENT,
                {"page_size", "at most 1000", "got 1001"});
  query.set_page_size(1000);
  auto ok = client_->ListJobs(query);
  ASSERT_RPC_OK(ok);
  EXPECT_EQ(ok.response.jobs_size(), 4);
  query.add_states(static_cast<v1::JobState>(99));
  ExpectRefused([&] { return client_->ListJobs(query).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"states[0]", "99"});
  query.clear_states();
  query.add_states(v1::JOB_STATE_READY);
  query.add_states(v1::JOB_STATE_UNSPECIFIED);
  ExpectRefused([&] { return client_->ListJobs(query).status; },
                grpc::StatusCode::INVALID_ARGUMENT, {"states[1]"});
}

TEST_F(RefusalTest, ForgedPageToken) {
  v1::ListJobsRequest query;
  query.set_topic("seed");
  query.set_page_size(1);
  auto first = client_->ListJobs(query);
  ASSERT_RPC_OK(first);
  const std::string token = first.response.next_page_token();
  ASSERT_FALSE(token.empty());

  std::string raw;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token, &raw));
  std::string flipped = raw;
  flipped[3] ^= 0x40;  // inside the query fingerprint
  std::vector<std::string> forged = {
      "not a token",
      "AAAA",
      token.substr(0, token.size() / 2),
      absl::WebSafeBase64Escape(flipped),
      absl::WebSafeBase64Escape(std::string(9, '\xff') + "2d"),
      std::string(kMiB, 'A')};
  for (const std::string& bad : forged) {
    SCOPED_TRACE(absl::CHexEscape(bad.substr(0, 40)));
    query.set_page_token(bad);
    ExpectRefused([&] { return client_->ListJobs(query).status; },
                  grpc::StatusCode::INVALID_ARGUMENT, {"page_token"});
  }
  // A real token, but for another query.
  query.set_page_token(token);
  for (int change = 0; change < 4; ++change) {
    SCOPED_TRACE(change);
    v1::ListJobsRequest other = query;
    if (change == 0) other.set_topic("orders.close");
    if (change == 1) other.set_id_prefix("1");
    if (change == 2) other.add_states(v1::JOB_STATE_SCHEDULED);
    if (change == 3) *other.mutable_due_before() = ToProto(absl::Now());
    ExpectRefused([&] { return client_->ListJobs(other).status; },
                  grpc::StatusCode::INVALID_ARGUMENT,
                  {"page_token", "another query"});
  }
  // The page size and include_payload may change between pages.
  query.set_page_size(10);
  query.set_include_payload(true);
  auto rest = client_->ListJobs(query);
  ASSERT_RPC_OK(rest);
  EXPECT_EQ(rest.response.jobs_size(), 3);
}

}  // namespace
}  // namespace delayd::testing
