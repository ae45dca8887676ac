// JsonApi over a JobService (in-memory store, fake clock): the routing, the
// path, query and body rules, and the status mapping. The real server over
// HTTP is tests/e2e/http_api_test.py.
#include "server/http/json_api.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/http/http_reply.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class JsonApiTest : public JobServiceTest {
 protected:
  JsonApiTest() : api_(&service()) { api_.StartServing(); }

  HttpReply Call(absl::string_view method, absl::string_view path,
                 absl::string_view body = "", absl::string_view query = "") {
    HttpRequest request;
    request.method = method;
    request.path = path;
    request.query = query;
    request.body = body;
    return api_.Handle(request);
  }

  JsonApi api_;
};

// GetStatsJson writes the topics itself; it must print what protobuf's
// JSON mapping prints, for any values (0, the extremes, random ones).
TEST(GetStatsJsonTest, PrintsWhatProtobufsJsonMappingPrints) {
  std::mt19937_64 rng(3);
  const auto value = [&]() -> uint64_t {
    switch (rng() % 4) {
      case 0:
        return 0;
      case 1:
        return UINT64_MAX;
      default:
        return rng() >> (rng() % 64);
    }
  };
  for (int round = 0; round < 200; ++round) {
    v1::GetStatsResponse r;
    const int topics = static_cast<int>(rng() % 4);
    for (int i = 0; i < topics; ++i) {
      v1::TopicStats* t = r.add_topics();
      t->set_topic(absl::StrCat("t.", i, ":x-", rng() % 100));
      t->set_scheduled(value());
      t->set_ready(value());
      t->set_in_flight(value());
      t->set_dead(value());
      t->set_subscribers(static_cast<uint32_t>(value()));
      t->set_due_next_minute(value());
      t->set_due_next_hour(value());
      t->set_due_next_day(value());
      t->set_done(value());
      t->set_canceled(value());
      t->set_fired(value());
      t->set_acked(value());
    }
    if (rng() % 2 == 0) {
      v1::DueSoon* soon = r.mutable_due_soon();
      soon->mutable_from()->set_seconds(1'700'000'000 + round);
      for (int i = 0; i < 60; ++i) soon->add_per_minute(value());
      for (int i = 0; i < 24; ++i) soon->add_per_hour(value());
    }
    for (double le :
         {0.0005, 0.25, 1.0, 300.0, std::numeric_limits<double>::infinity()}) {
      if (rng() % 3 == 0) continue;
      v1::LatenessBucket* b = r.add_fire_lateness();
      b->set_le_seconds(le);
      b->set_count(value());
    }
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    std::string want;
    ASSERT_TRUE(
        google::protobuf::util::MessageToJsonString(r, &want, options).ok());
    ASSERT_EQ(GetStatsJson(r), want) << r.ShortDebugString();
  }
}

TEST_F(JsonApiTest, StatsAnswerInProtobufsJsonMapping) {
  MustSchedule("a", "x", 30'000);
  MustSchedule("b", "y", 7'200'000);
  HttpReply r = Call("GET", "/api/v1/stats", "", "due_soon=true");
  ASSERT_EQ(r.code, 200) << r.body;
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse want, service().GetStats([] {
    v1::GetStatsRequest req;
    req.set_due_soon(true);
    return req;
  }()));
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  ASSERT_TRUE(
      google::protobuf::util::MessageToJsonString(want, &json, options).ok());
  EXPECT_EQ(r.body, json + "\n");
  EXPECT_THAT(r.body, HasSubstr(R"("topic":"b","scheduled":"1")"));
}

TEST_F(JsonApiTest, SchedulesGetsAndCancelsAJob) {
  HttpReply r = Call("POST", "/api/v1/jobs",
                     R"({"job": {"topic": "t", "id": "a/b: c", "delay": "60s",
                                 "payload": "aGk="}})");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("created":true)"));
  EXPECT_EQ(Stored("t", "a/b: c")->job().payload(), "hi");

  r = Call("GET", "/api/v1/topics/t/jobs/a/b: c");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("state":"JOB_STATE_SCHEDULED")"));
  EXPECT_THAT(r.body, HasSubstr(R"("attempts":0)"));  // zeros are shown

  r = Call("POST", "/api/v1/topics/t/jobs/a/b: c:reschedule",
           R"({"delay": "120s"})");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Ms(Stored("t", "a/b: c")->job().fire_at()), kStartMs + 120'000);

  r = Call("DELETE", "/api/v1/topics/t/jobs/a/b: c");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("CANCEL_OUTCOME_CANCELED"));
  EXPECT_EQ(Call("GET", "/api/v1/topics/t/jobs/a/b: c").code, 404);
}

TEST_F(JsonApiTest, ATopicMayHoldAColonBeforeItsVerb) {
  HttpReply r = Call("POST", "/api/v1/topics/a:b:redrive");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "{\"redriven\":\"0\"}\n");
  MustSchedule("a:b", "x1", 60'000);
  r = Call("POST", "/api/v1/topics/a:b/jobs:cancelByPrefix",
           R"({"idPrefix": "x"})");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "{\"canceled\":\"1\"}\n");
  EXPECT_FALSE(Stored("a:b", "x1").has_value());  // no --retention
}

TEST_F(JsonApiTest, RedriveTakesOneJobByItsExactId) {
  PutRecord("t", "a", v1::JOB_STATE_DEAD, kStartMs);
  PutRecord("t", "ab", v1::JOB_STATE_DEAD, kStartMs);
  HttpReply r = Call("POST", "/api/v1/topics/t:redrive",
                     R"({"id": "a", "idPrefix": "a"})");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("id: give id (one job) or id_prefix"));
  r = Call("POST", "/api/v1/topics/t:redrive", R"({"id": "a"})");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "{\"redriven\":\"1\"}\n");
  EXPECT_EQ(Stored("t", "a")->job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Stored("t", "ab")->job().state(), v1::JOB_STATE_DEAD);
}

TEST_F(JsonApiTest, QueryParametersReadAsTheirFields) {
  for (const char* id : {"k1", "k2", "x1"}) MustSchedule("t", id, 60'000);
  HttpReply r = Call("GET", "/api/v1/topics/t/jobs", "",
                     "state=SCHEDULED&prefix=k&pageSize=1");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("id":"k1")"));
  EXPECT_THAT(r.body, Not(HasSubstr(R"("id":"k2")")));
  EXPECT_THAT(r.body, Not(HasSubstr(R"("nextPageToken":"")")));

  r = Call("GET", "/api/v1/topics/t/jobs", "",
           "states=JOB_STATE_DEAD&include_payload=true");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "{\"jobs\":[],\"nextPageToken\":\"\"}\n");

  // A value is read as a string: it cannot smuggle in another field.
  r = Call("GET", "/api/v1/topics/t/jobs", "", "page_size=1,\"topic\":\"u\"");
  EXPECT_EQ(r.code, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("query parameter 'page_size'"));

  r = Call("GET", "/api/v1/topics/t/jobs", "", "include_payload=yes");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("must be true or false"));

  r = Call("GET", "/api/v1/stats", "", "topic=t&topic=u");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("'topic': given twice"));

  // A call whose request is its path and body takes no query.
  r = Call("POST", "/api/v1/jobs",
           R"({"job": {"topic": "t", "id": "q", "delay": "1s"}})",
           "if_exists=IF_EXISTS_REPLACE");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("'if_exists': this call takes none"));
  EXPECT_FALSE(Stored("t", "q").has_value());
  EXPECT_EQ(Call("GET", "/api/v1/topics/t/jobs/k1", "", "x=1").code, 400);

  r = Call("GET", "/api/v1/stats", "", "colour=red");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("'colour': unknown; this call takes topic"));
}

TEST_F(JsonApiTest, TopicAndIdAreDecodedAfterThePathIsSplit) {
  MustSchedule("t", "a", 60'000);
  MustSchedule("t", "a/b:c", 60'000);
  // %2F and %3A belong to the id; a NUL is refused, not cut at.
  HttpReply r = Call("GET", "/api/v1/topics/t/jobs/a%2Fb%3Ac");
  EXPECT_EQ(r.code, 200) << r.body;
  r = Call("POST", "/api/v1/topics/t/jobs/a%2Fb%3Ac:reschedule",
           R"({"delay": "5s"})");
  EXPECT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Ms(Stored("t", "a/b:c")->job().fire_at()), kStartMs + 5'000);
  r = Call("DELETE", "/api/v1/topics/t/jobs/a%00b");
  EXPECT_EQ(r.code, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("key.id"));
  EXPECT_EQ(Stored("t", "a")->job().state(), v1::JOB_STATE_SCHEDULED);
  r = Call("GET", "/api/v1/topics/t%00x/jobs");
  EXPECT_EQ(r.code, 400) << r.body;
}

TEST_F(JsonApiTest, ThePathAndTheBodyMustAgreeOnTheKey) {
  MustSchedule("t", "a", 60'000);
  HttpReply r = Call("POST", "/api/v1/topics/t/jobs/a:reschedule",
                     R"({"key": {"topic": "t", "id": "b"}, "delay": "1s"})");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("key.id: the path says \\\"a\\\""));
  EXPECT_EQ(Ms(Stored("t", "a")->job().fire_at()), kStartMs + 60'000);
}

TEST_F(JsonApiTest, RefusalsCarryTheirStatusAndNameTheField) {
  HttpReply r = Call("POST", "/api/v1/jobs", R"({"job": {"topic": "t!"}})");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr(R"("status":"INVALID_ARGUMENT")"));
  EXPECT_THAT(r.body, HasSubstr("job.topic"));

  r = Call("POST", "/api/v1/jobs", "{not json");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("body: not a ScheduleRequest in JSON"));

  r = Call("POST", "/api/v1/jobs", R"({"jobb": {}})");
  EXPECT_EQ(r.code, 400) << r.body;

  MustSchedule("t", "a", 60'000);
  r = Call("POST", "/api/v1/jobs",
           R"({"job": {"topic": "t", "id": "a", "delay": "5s"}})");
  EXPECT_EQ(r.code, 409);
  EXPECT_THAT(r.body, HasSubstr(R"("status":"ALREADY_EXISTS")"));

  r = Call("POST", "/api/v1/topics/t/jobs/a:pause");
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr(R"("status":"FAILED_PRECONDITION")"));

  EXPECT_EQ(Call("GET", "/api/v1/topics/t/jobs/nope").code, 404);
}

TEST_F(JsonApiTest, UnknownRoutesAndMethods) {
  EXPECT_EQ(Call("GET", "/api/v1/nothing").code, 404);
  EXPECT_EQ(Call("GET", "/api/v2/jobs").code, 404);
  EXPECT_EQ(Call("POST", "/api/v1/topics/t:purge").code, 404);
  EXPECT_EQ(Call("POST", "/api/v1/topics/t/jobs/a:explode").code, 404);

  HttpReply r = Call("GET", "/api/v1/jobs");
  EXPECT_EQ(r.code, 405);
  EXPECT_EQ(r.allow, "POST");
  r = Call("POST", "/api/v1/topics/t/jobs/a");
  EXPECT_EQ(r.code, 405);
  EXPECT_EQ(r.allow, "GET, DELETE");
  EXPECT_EQ(Call("DELETE", "/api/v1/stats").allow, "GET");
  r = Call("PUT", "/api/v1/topics/t/jobs/a:reschedule");
  EXPECT_EQ(r.code, 405);
  EXPECT_EQ(r.allow, "POST");
}

TEST_F(JsonApiTest, ABrowsersCallThatChangesStateNeedsTheCsrfToken) {
  MustSchedule("t", "a", 60'000);
  HttpRequest request;
  request.method = "POST";
  request.path = "/api/v1/topics/t/jobs/a:cancel";
  request.from_browser = true;
  HttpReply r = api_.Handle(request);
  EXPECT_EQ(r.code, 403);
  EXPECT_THAT(r.body, HasSubstr("X-CSRF-Token"));
  const std::string wrong(api_.csrf_token().size(), '0');
  request.csrf_token = wrong;
  EXPECT_EQ(api_.Handle(request).code, 403);
  ASSERT_TRUE(Stored("t", "a").has_value());  // nothing changed

  request.method = "GET";  // reads need none
  request.path = "/api/v1/topics/t/jobs/a";
  EXPECT_EQ(api_.Handle(request).code, 200);
  request.method = "OPTIONS";  // nor a method no route takes
  EXPECT_EQ(api_.Handle(request).code, 405);

  request.method = "POST";
  request.path = "/api/v1/topics/t/jobs/a:cancel";
  request.csrf_token = api_.csrf_token();
  r = api_.Handle(request);
  EXPECT_EQ(r.code, 200) << r.body;
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_EQ(api_.csrf_token().size(), 32u);
  EXPECT_NE(JsonApi(&service()).csrf_token(), api_.csrf_token());
}

TEST_F(JsonApiTest, AnswersUnavailableWhileNotServing) {
  api_.StartDraining();
  HttpReply r = Call("GET", "/api/v1/stats");
  EXPECT_EQ(r.code, 503);
  EXPECT_THAT(r.body, HasSubstr(R"("status":"UNAVAILABLE")"));
}

TEST(HttpReplyTest, CodesMapAsGoogleApisMapThem) {
  using absl::StatusCode;
  EXPECT_EQ(HttpStatusOf(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusOf(StatusCode::kInternal), 500);
}

TEST(HttpReplyTest, JsonQuoteEscapesMarkupControlsAndBadUtf8) {
  EXPECT_EQ(JsonQuote("<script>\"\\\n"), R"("\u003cscript\u003e\"\\\u000a")");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9 \xe2\x82\xac"),
            "\"caf\xc3\xa9 \xe2\x82\xac\"");
  // A lone continuation byte, an overlong '/', a surrogate.
  EXPECT_EQ(JsonQuote("a\x80"
                      "b\xc0\xaf"
                      "c\xed\xa0\x80"),
            R"("a\ufffdb\ufffd\ufffdc\ufffd\ufffd\ufffd")");
}

}  // namespace
}  // namespace delayd::server::testing
