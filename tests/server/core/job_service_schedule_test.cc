// JobService: Schedule and ScheduleBatch — every if_exists mode, generated
// ids, and a refusal with "nothing changed" for each limit of DESIGN.md's
// limits table.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST_F(JobServiceTest, ScheduleStoresJobWithDefaultsArmsTimerAndCounts) {
  v1::ScheduleRequest req = ScheduleReq("orders.close", "order-8812", 30'000,
                                        "payload-bytes", v1::IF_EXISTS_FAIL);
  (*req.mutable_job()->mutable_labels())["tenant"] = "acme";
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(req));
  EXPECT_TRUE(r.created());
  const v1::Job& job = r.job();
  EXPECT_EQ(job.topic(), "orders.close");
  EXPECT_EQ(job.id(), "order-8812");
  EXPECT_EQ(job.payload(), "payload-bytes");
  EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Ms(job.fire_at()), kStartMs + 30'000);
  EXPECT_EQ(Ms(job.created_at()), kStartMs);
  EXPECT_EQ(Ms(job.updated_at()), kStartMs);
  EXPECT_EQ(job.attempts(), 0u);
  EXPECT_EQ(job.labels().at("tenant"), "acme");
  EXPECT_EQ(job.retry().max_attempts(), 10u);
  EXPECT_EQ(job.retry().lease().seconds(), 30);
  EXPECT_EQ(job.retry().initial_backoff().seconds(), 1);
  EXPECT_EQ(job.retry().max_backoff().seconds(), 600);
  EXPECT_EQ(job.retry().backoff_multiplier(), 2.0);

  std::optional<storage::JobRecord> stored =
      Stored("orders.close", "order-8812");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().SerializeAsString(), job.SerializeAsString());
  ASSERT_OK_AND_ASSIGN(v1::Job got,
                       service().GetJob(GetReq("orders.close", "order-8812")));
  EXPECT_EQ(got.SerializeAsString(), job.SerializeAsString());
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("orders.close").live, 1);
  EXPECT_EQ(Counts("orders.close").scheduled(), 1);
  // Synced: OK means durable.
  EXPECT_EQ(memory_.stats().synced_writes, 1u);
}

TEST_F(JobServiceTest, ScheduleWithoutWhenIsDueNowAndShownReady) {
  v1::ScheduleRequest req = ScheduleReq("t", "now", 0);
  req.mutable_job()->clear_delay();
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(req));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs);
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_READY);
}

TEST_F(JobServiceTest, ScheduleWithPastFireAtIsDueNow) {
  v1::ScheduleRequest req = ScheduleReq("t", "past", 0);
  *req.mutable_job()->mutable_fire_at() = TimestampMs(kStartMs - 3'600'000);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(req));
  EXPECT_LE(Ms(r.job().fire_at()), kStartMs);
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_READY);
}

TEST_F(JobServiceTest, ScheduleAcceptsTheLimitsThemselves) {
  v1::ScheduleRequest req =
      ScheduleReq(std::string(128, 'T'), std::string(256, 'i'), 0,
                  std::string(1 << 20, 'p'));
  *req.mutable_job()->mutable_fire_at() = TimestampMs(
      kStartMs + absl::ToInt64Milliseconds(limits_.max_schedule_ahead));
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(req));
  EXPECT_TRUE(r.created());
  // Non-ASCII UTF-8 ids are fine.
  EXPECT_OK(service().Schedule(ScheduleReq("t", "заказ-€-😀", 10)));
  EXPECT_OK(service().Schedule(ScheduleReq("a-Z_0.9:x", "", 10)));
}

TEST_F(JobServiceTest, EmptyIdGetsAUniqueTimeOrderedId) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r,
                         service().Schedule(ScheduleReq("t", "", 1000)));
    EXPECT_TRUE(r.created());
    EXPECT_THAT(r.job().id(), MatchesRegex("[0-9a-f]{12}-[0-9a-f]{16}"));
    ids.push_back(r.job().id());
    clock_.AdvanceMs(i % 2);  // some in the same millisecond
  }
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  EXPECT_EQ(Counts("t").live, 5);
  for (const std::string& id : ids) EXPECT_TRUE(Stored("t", id).has_value());
}

TEST_F(JobServiceTest, IfExistsFailAndUnspecifiedAcceptAnIdenticalRetry) {
  for (v1::IfExists mode : {v1::IF_EXISTS_FAIL, v1::IF_EXISTS_UNSPECIFIED}) {
    SCOPED_TRACE(v1::IfExists_Name(mode));
    const std::string id = absl::StrCat("retry-", mode);
    const v1::ScheduleRequest req = ScheduleReq("t", id, 5000, "p", mode);
    ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse first, service().Schedule(req));
    const std::string before = State();
    clock_.AdvanceMs(10);  // a retry arrives a bit later
    ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse again, service().Schedule(req));
    EXPECT_FALSE(again.created());
    EXPECT_EQ(again.job().SerializeAsString(), first.job().SerializeAsString());
    EXPECT_EQ(State(), before);
  }
}

TEST_F(JobServiceTest, IfExistsFailRefusesADifferentSpec) {
  MustSchedule("t", "a", 5000, "one");
  const std::string before = State();
  for (v1::IfExists mode : {v1::IF_EXISTS_FAIL, v1::IF_EXISTS_UNSPECIFIED}) {
    absl::StatusOr<v1::ScheduleResponse> r =
        service().Schedule(ScheduleReq("t", "a", 5000, "two", mode));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"a\""));
    r = service().Schedule(ScheduleReq("t", "a", 6000, "one", mode));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(State(), before);
}

TEST_F(JobServiceTest, IfExistsKeepReturnsTheExistingJobUntouched) {
  const v1::Job original = MustSchedule("t", "a", 5000, "one");
  const std::string before = State();
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r,
                       service().Schedule(ScheduleReq("t", "a", 9000, "two",
                                                      v1::IF_EXISTS_KEEP)));
  EXPECT_FALSE(r.created());
  EXPECT_EQ(r.job().SerializeAsString(), original.SerializeAsString());
  EXPECT_EQ(State(), before);
  // KEEP of an absent job creates it.
  ASSERT_OK_AND_ASSIGN(
      r, service().Schedule(ScheduleReq("t", "b", 1, "", v1::IF_EXISTS_KEEP)));
  EXPECT_TRUE(r.created());
}

TEST_F(JobServiceTest, IfExistsReplaceUpsertsKeepingCreatedAt) {
  const v1::Job original = MustSchedule("t", "a", 5000, "one");
  clock_.AdvanceMs(100);
  v1::ScheduleRequest req =
      ScheduleReq("t", "a", 60'000, "two", v1::IF_EXISTS_REPLACE);
  (*req.mutable_job()->mutable_labels())["k"] = "v";
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(req));
  EXPECT_TRUE(r.created());
  EXPECT_EQ(r.job().payload(), "two");
  EXPECT_EQ(r.job().labels().at("k"), "v");
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 100 + 60'000);
  EXPECT_EQ(Ms(r.job().created_at()), Ms(original.created_at()));
  EXPECT_EQ(Ms(r.job().updated_at()), kStartMs + 100);
  ASSERT_OK_AND_ASSIGN(v1::Job got, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(got.payload(), "two");
  // Still one job, one timer, one due entry (at the new time).
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, 1);
  std::vector<int64_t> due;
  ASSERT_OK(memory_.ScanDue(
      0, INT64_MAX, [&](int64_t ms, std::string_view, std::string_view) {
        due.push_back(ms);
        return true;
      }));
  EXPECT_THAT(due, ::testing::ElementsAre(kStartMs + 100 + 60'000));
  // REPLACE of an absent job creates it.
  ASSERT_OK_AND_ASSIGN(r, service().Schedule(ScheduleReq(
                              "t", "b", 1, "", v1::IF_EXISTS_REPLACE)));
  EXPECT_TRUE(r.created());
  EXPECT_EQ(Counts("t").live, 2);
}

TEST_F(JobServiceTest, ScheduleOverADoneOrCanceledRecordCreatesAfresh) {
  PutRecord("t", "done", v1::JOB_STATE_DONE, kStartMs - 10);
  PutRecord("t", "gone", v1::JOB_STATE_CANCELED, kStartMs - 10);
  for (const char* id : {"done", "gone"}) {
    ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r,
                         service().Schedule(ScheduleReq("t", id, 1000)));
    EXPECT_TRUE(r.created()) << id;
    EXPECT_EQ(r.job().state(), v1::JOB_STATE_SCHEDULED);
    EXPECT_EQ(r.job().payload(), "");
  }
  EXPECT_EQ(Counts("t").live, 2);
  EXPECT_EQ(service().timers_pending(), 2u);
}

TEST_F(JobServiceTest, ScheduleAfterCancelCreatesAgain) {
  MustSchedule("t", "a", 1000);
  ASSERT_OK(service().Cancel(CancelReq("t", "a")));
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r,
                       service().Schedule(ScheduleReq("t", "a", 1000, "x")));
  EXPECT_TRUE(r.created());
  EXPECT_EQ(Counts("t").live, 1);
  EXPECT_EQ(service().timers_pending(), 1u);
}

// One refusal per limit of the table: INVALID_ARGUMENT naming the field,
// nothing written, no timer, no count.
TEST_F(JobServiceTest, ScheduleRefusesEachLimitAndChangesNothing) {
  MustSchedule("t", "existing", 1000);
  const std::string before = State();
  struct Case {
    const char* name;
    const char* field;
    v1::ScheduleRequest req;
  };
  auto with = [](v1::ScheduleRequest req, auto edit) {
    edit(*req.mutable_job());
    return req;
  };
  const v1::ScheduleRequest ok = ScheduleReq("t", "new", 1000);
  std::vector<Case> cases = {
      {"empty topic", "job.topic", ScheduleReq("", "x", 1)},
      {"129-byte topic", "job.topic",
       ScheduleReq(std::string(129, 't'), "x", 1)},
      {"space in topic", "job.topic", ScheduleReq("orders close", "x", 1)},
      {"slash in topic", "job.topic", ScheduleReq("orders/close", "x", 1)},
      {"non-ASCII topic", "job.topic", ScheduleReq("tópico", "x", 1)},
      {"NUL in topic", "job.topic",
       ScheduleReq(std::string("a\0b", 3), "x", 1)},
      {"257-byte id", "job.id", ScheduleReq("t", std::string(257, 'i'), 1)},
      {"invalid UTF-8 id", "job.id", ScheduleReq("t", "bad\xff", 1)},
      {"overlong UTF-8 id", "job.id", ScheduleReq("t", "\xc0\xaf", 1)},
      {"surrogate id", "job.id", ScheduleReq("t", "\xed\xa0\x80", 1)},
      {"truncated UTF-8 id", "job.id", ScheduleReq("t", "\xe2\x82", 1)},
      {"newline in id", "job.id", ScheduleReq("t", "a\nb", 1)},
      {"NUL in id", "job.id", ScheduleReq("t", std::string("a\0b", 3), 1)},
      {"DEL in id", "job.id", ScheduleReq("t", "a\x7f", 1)},
      {"C1 control in id", "job.id", ScheduleReq("t", "a\xc2\x85", 1)},
      {"payload over 1 MiB", "job.payload",
       ScheduleReq("t", "x", 1, std::string((1 << 20) + 1, 'p'))},
      {"negative delay", "job.delay", ScheduleReq("t", "x", -1)},
      {"negative delay seconds", "job.delay", ScheduleReq("t", "x", -5000)},
      {"malformed delay", "job.delay",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_delay()->set_seconds(1);
              s.mutable_delay()->set_nanos(-5);
            })},
      {"delay over 100 years", "job.delay",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_delay()->set_seconds(101ll * 366 * 86400);
            })},
      {"fire_at over 100 years ahead", "job.fire_at",
       with(ok,
            [&](v1::JobSpec& s) {
              *s.mutable_fire_at() = TimestampMs(
                  kStartMs +
                  absl::ToInt64Milliseconds(limits_.max_schedule_ahead) + 1);
            })},
      {"fire_at nanos negative", "job.fire_at",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_fire_at()->set_seconds(1);
              s.mutable_fire_at()->set_nanos(-1);
            })},
      {"fire_at nanos too big", "job.fire_at",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_fire_at()->set_seconds(1);
              s.mutable_fire_at()->set_nanos(1'000'000'000);
            })},
      {"fire_at before year 1", "job.fire_at",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_fire_at()->set_seconds(-62135596801);
            })},
      {"fire_at after year 9999", "job.fire_at",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_fire_at()->set_seconds(253402300800);
            })},
      {"too many labels", "job.labels",
       with(ok,
            [](v1::JobSpec& s) {
              for (int i = 0; i < 33; ++i)
                (*s.mutable_labels())[absl::StrCat(i)] = "";
            })},
      {"empty label key", "job.labels",
       with(ok, [](v1::JobSpec& s) { (*s.mutable_labels())[""] = "v"; })},
      {"long label value", "job.labels[k]",
       with(ok,
            [](v1::JobSpec& s) {
              (*s.mutable_labels())["k"] = std::string(257, 'v');
            })},
      {"max_attempts over 1000", "job.retry.max_attempts",
       with(ok,
            [](v1::JobSpec& s) { s.mutable_retry()->set_max_attempts(1001); })},
      {"zero lease", "job.retry.lease",
       with(ok, [](v1::JobSpec& s) { s.mutable_retry()->mutable_lease(); })},
      {"negative backoff", "job.retry.initial_backoff",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_retry()->mutable_initial_backoff()->set_seconds(-1);
            })},
      {"multiplier below 1", "job.retry.backoff_multiplier",
       with(ok,
            [](v1::JobSpec& s) {
              s.mutable_retry()->set_backoff_multiplier(0.5);
            })},
  };
  v1::ScheduleRequest bad_mode = ok;
  bad_mode.set_if_exists(static_cast<v1::IfExists>(42));
  cases.push_back({"unknown if_exists", "if_exists", bad_mode});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectInvalid(service().Schedule(c.req).status(), c.field);
    // Also refused as part of a batch, for that request alone, by its path.
    v1::ScheduleBatchRequest batch;
    *batch.add_requests() = c.req;
    ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                         service().ScheduleBatch(batch));
    ASSERT_EQ(r.results_size(), 1);
    EXPECT_EQ(r.results(0).code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(r.results(0).message(), ::testing::StartsWith(absl::StrCat(
                                            "requests[0].", c.field, ":")));
    EXPECT_EQ(State(), before);
  }
  EXPECT_EQ(memory_.stats().writes, 1u);  // only the first Schedule
}

TEST_F(JobServiceTest, ScheduleBatchWritesAllInOneSyncedWrite) {
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 10; ++i) {
    *batch.add_requests() = ScheduleReq("t", absl::StrCat("j", i), 1000 + i);
  }
  *batch.add_requests() = ScheduleReq("other", "", 5);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  ASSERT_EQ(r.results_size(), 11);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r.results(i).code(), 0);
    EXPECT_EQ(r.results(i).message(), "");
    EXPECT_TRUE(r.results(i).created());
    EXPECT_EQ(r.results(i).job().id(), absl::StrCat("j", i));
    EXPECT_EQ(Ms(r.results(i).job().fire_at()), kStartMs + 1000 + i);
  }
  EXPECT_FALSE(r.results(10).job().id().empty());
  EXPECT_EQ(memory_.stats().writes, 1u);
  EXPECT_EQ(memory_.stats().synced_writes, 1u);
  EXPECT_EQ(memory_.stats().mutations_written, 11u);
  EXPECT_EQ(Counts("t").live, 10);
  EXPECT_EQ(Counts("other").live, 1);
  EXPECT_EQ(service().timers_pending(), 11u);
}

TEST_F(JobServiceTest, ScheduleBatchGivesEachRequestItsOwnResult) {
  MustSchedule("t", "exists", 1000, "old");
  v1::ScheduleBatchRequest batch;
  *batch.add_requests() = ScheduleReq("t", "a", 100);               // OK
  *batch.add_requests() = ScheduleReq("bad topic", "b", 100);       // invalid
  *batch.add_requests() = ScheduleReq("t", "exists", 1000, "new");  // exists
  *batch.add_requests() = ScheduleReq("t", "a", 200);               // duplicate
  *batch.add_requests() =
      ScheduleReq("t", "exists", 1, "", v1::IF_EXISTS_KEEP);  // duplicate
  *batch.add_requests() = ScheduleReq("u", "a", 300);  // other topic: fine
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  ASSERT_EQ(r.results_size(), 6);
  EXPECT_EQ(r.results(0).code(), 0);
  EXPECT_TRUE(r.results(0).created());
  EXPECT_EQ(r.results(1).code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.results(1).message(),
              ::testing::StartsWith("requests[1].job.topic:"));
  EXPECT_EQ(r.results(2).code(),
            static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_FALSE(r.results(2).has_job());
  EXPECT_EQ(r.results(3).code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.results(3).message(), HasSubstr("requests[0]"));
  // Names the same job as requests[2] (which was refused): still refused.
  EXPECT_EQ(r.results(4).code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.results(4).message(), HasSubstr("requests[2]"));
  EXPECT_EQ(r.results(5).code(), 0);
  // Only the accepted ones were written, the first "a" wins.
  ASSERT_OK_AND_ASSIGN(v1::Job a, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(Ms(a.fire_at()), kStartMs + 100);
  ASSERT_OK_AND_ASSIGN(v1::Job exists, service().GetJob(GetReq("t", "exists")));
  EXPECT_EQ(exists.payload(), "old");
  EXPECT_EQ(Counts("t").live, 2);
  EXPECT_EQ(Counts("u").live, 1);
  EXPECT_EQ(service().timers_pending(), 3u);
}

TEST_F(JobServiceTest, ScheduleBatchHandlesEveryIfExistsMode) {
  MustSchedule("t", "fail", 1000, "p");
  MustSchedule("t", "keep", 1000, "p");
  MustSchedule("t", "replace", 1000, "p");
  v1::ScheduleBatchRequest batch;
  *batch.add_requests() = ScheduleReq("t", "fail", 1000, "p");  // identical
  *batch.add_requests() = ScheduleReq("t", "keep", 5, "q", v1::IF_EXISTS_KEEP);
  *batch.add_requests() =
      ScheduleReq("t", "replace", 5, "q", v1::IF_EXISTS_REPLACE);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.results(i).code(), 0) << i;
  EXPECT_FALSE(r.results(0).created());
  EXPECT_FALSE(r.results(1).created());
  EXPECT_EQ(r.results(1).job().payload(), "p");
  EXPECT_TRUE(r.results(2).created());
  EXPECT_EQ(r.results(2).job().payload(), "q");
  EXPECT_EQ(Counts("t").live, 3);
  EXPECT_EQ(service().timers_pending(), 3u);
}

TEST_F(JobServiceTest, ScheduleBatchRefusesEmptyAndOversizedBatches) {
  MustSchedule("t", "existing", 1000);
  const std::string before = State();
  ExpectInvalid(service().ScheduleBatch({}).status(), "requests");
  v1::ScheduleBatchRequest big;
  for (int i = 0; i < 1001; ++i) {
    *big.add_requests() = ScheduleReq("t", absl::StrCat("j", i), 1000);
  }
  ExpectInvalid(service().ScheduleBatch(big).status(), "requests");
  EXPECT_EQ(State(), before);
  // Exactly 1000 is fine.
  big.mutable_requests()->RemoveLast();
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(big));
  EXPECT_EQ(r.results_size(), 1000);
  EXPECT_EQ(Counts("t").live, 1001);
}

}  // namespace
}  // namespace delayd::server::testing
