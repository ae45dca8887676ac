// QuotaKeeper: the token bucket of schedules_per_second, the pending jobs
// of a pattern (live jobs as TopicTable counts them, plus reservations of
// calls still writing), and open subscriptions; each refusal
// RESOURCE_EXHAUSTED naming the quota, taking nothing.
#include "server/core/quota_keeper.h"

#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/auth/auth_config.h"
#include "server/timer/fake_clock.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

using ::testing::HasSubstr;

class QuotaKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A file of this process's own: ctest runs each test of this file as a
    // process of its own, two at a time, and a shared path let one read the
    // file half rewritten by another (no subscriptions quota, so the third
    // subscription was admitted).
    const std::string path = absl::StrCat(
        ::testing::TempDir(), "/quota_keeper_test_auth.", getpid(), ".txt");
    std::ofstream(path) << "principal limited\n"
                        << "  token sha256:" << auth::Sha256Hex("limited")
                        << "\n"
                        << "  grant admin *\n"
                        << "  quota schedules_per_second 10 burst 4\n"
                        << "  quota pending orders.* 5\n"
                        << "  quota pending_bytes big.* 1000\n"
                        << "  quota subscriptions 2\n"
                        << "principal free\n"
                        << "  token sha256:" << auth::Sha256Hex("free") << "\n"
                        << "  grant admin *\n";
    ASSERT_OK_AND_ASSIGN(access_, Access::FromFile(path));
  }

  Caller As(const std::string& token) {
    const std::string header = "Bearer " + token;
    Credentials credentials;
    credentials.authorization = header;
    return access_->Authenticate(credentials).value_or(Caller());
  }

  // Jobs of these topics with empty payloads.
  absl::StatusOr<QuotaKeeper::Ticket> Jobs(const Caller& caller,
                                           std::vector<absl::string_view> t) {
    std::vector<QuotaKeeper::NewJob> jobs;
    for (absl::string_view topic : t) jobs.push_back({topic, 0});
    return keeper_.AdmitJobs(caller, jobs);
  }

  std::unique_ptr<Access> access_;
  prometheus::Registry registry_;
  QuotaMetrics metrics_{registry_};
  TopicTable topics_;
  timer::FakeClock clock_{1'000'000};
  QuotaKeeper keeper_{&topics_, &clock_, &metrics_};
};

TEST_F(QuotaKeeperTest, SchedulesPerSecondIsATokenBucket) {
  const Caller limited = As("limited");
  // The burst at once (topics outside the pending quota).
  EXPECT_OK(Jobs(limited, {"a", "b", "c"}));
  EXPECT_OK(Jobs(limited, {"d"}));
  absl::StatusOr<QuotaKeeper::Ticket> refused = Jobs(limited, {"e"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("quota schedules_per_second of principal 'limited'"));
  // 10 per second: one more every 100 ms, never more than the burst.
  clock_.AdvanceMs(99);
  EXPECT_FALSE(Jobs(limited, {"e"}).ok());
  clock_.AdvanceMs(1);
  EXPECT_OK(Jobs(limited, {"e"}));
  clock_.AdvanceMs(60'000);
  EXPECT_OK(Jobs(limited, {"1", "2", "3", "4"}));
  EXPECT_FALSE(Jobs(limited, {"5"}).ok());
  // A batch larger than the burst can never pass, and says so.
  clock_.AdvanceMs(60'000);
  EXPECT_THAT(
      std::string(Jobs(limited, {"1", "2", "3", "4", "5"}).status().message()),
      HasSubstr("more than its burst of 4"));
  // A wall clock stepping back refills nothing and breaks nothing.
  EXPECT_OK(Jobs(limited, {"1", "2", "3", "4"}));
  clock_.AdvanceMs(-30'000);
  EXPECT_FALSE(Jobs(limited, {"1"}).ok());
  // Others and open access have no quota.
  for (int i = 0; i < 100; ++i) EXPECT_OK(Jobs(As("free"), {"x"}));
  EXPECT_OK(keeper_.AdmitJobs(Caller(), {{"x", 0}}));
}

TEST_F(QuotaKeeperTest, PendingCountsLiveJobsAndCallsStillWriting) {
  const Caller limited = As("limited");
  topics_.AddLive("orders.close", 2, 0);
  topics_.AddLive("billing.x", 100, 0);  // not under orders.*
  {
    // 2 live + 2 reserved by a call still writing + 2 more > 5.
    ASSERT_OK_AND_ASSIGN(QuotaKeeper::Ticket writing,
                         Jobs(limited, {"orders.a", "orders.b"}));
    absl::StatusOr<QuotaKeeper::Ticket> refused =
        Jobs(limited, {"orders.c", "orders.d"});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refused.status().message(),
              "quota pending orders.* of principal 'limited': 4 jobs pending "
              "there, and this call adds 2; the limit is 5");
    clock_.AdvanceMs(1000);  // tokens are not what refuses
    EXPECT_FALSE(Jobs(limited, {"orders.c", "orders.d"}).ok());
    EXPECT_OK(Jobs(limited, {"orders.c"}));  // 5: at the limit
    // The writing call's jobs become live; its ticket goes.
    topics_.AddLive("orders.a", 2, 0);
  }
  clock_.AdvanceMs(1000);
  // 4 live now: one more fits, two do not; other topics are not counted.
  EXPECT_FALSE(Jobs(limited, {"orders.x", "orders.y"}).ok());
  EXPECT_OK(Jobs(limited, {"orders.x", "billing.y", "other"}));
}

TEST_F(QuotaKeeperTest, PendingBytesCountLivePayloadsAndCallsStillWriting) {
  const Caller limited = As("limited");
  topics_.AddLive("big.a", 1, 300);
  topics_.AddLive("small", 1, 5000);  // not under big.*
  {
    // 300 live + 400 reserved by a call still writing + 301 more > 1000.
    ASSERT_OK_AND_ASSIGN(QuotaKeeper::Ticket writing,
                         keeper_.AdmitJobs(limited, {{"big.b", 400}}));
    absl::StatusOr<QuotaKeeper::Ticket> refused =
        keeper_.AdmitJobs(limited, {{"big.c", 300}, {"big.d", 1}});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refused.status().message(),
              "quota pending_bytes big.* of principal 'limited': 700 bytes "
              "of payload pending there, and this call adds 301; the limit "
              "is 1000");
    clock_.AdvanceMs(1000);
    EXPECT_OK(keeper_.AdmitJobs(limited, {{"big.c", 300}}));  // at the limit
    // Empty payloads and other topics add nothing.
    EXPECT_OK(keeper_.AdmitJobs(limited, {{"big.e", 0}, {"small", 9000}}));
    // The writing call's job becomes live; its ticket goes.
    topics_.AddLive("big.b", 1, 400);
  }
  clock_.AdvanceMs(1000);
  // 700 live now: 300 more fit, 301 do not.
  EXPECT_FALSE(keeper_.AdmitJobs(limited, {{"big.x", 301}}).ok());
  EXPECT_OK(keeper_.AdmitJobs(limited, {{"big.x", 300}}));
  // Jobs leaving give their bytes back.
  topics_.AddLive("big.a", -1, -300);
  clock_.AdvanceMs(1000);
  EXPECT_OK(keeper_.AdmitJobs(limited, {{"big.y", 300}}));
}

TEST_F(QuotaKeeperTest, SubscriptionsAreHeldUntilTheTicketGoes) {
  const Caller limited = As("limited");
  ASSERT_OK_AND_ASSIGN(QuotaKeeper::Ticket first,
                       keeper_.AdmitSubscription(limited));
  std::optional<QuotaKeeper::Ticket> second;
  {
    ASSERT_OK_AND_ASSIGN(QuotaKeeper::Ticket t,
                         keeper_.AdmitSubscription(limited));
    second = std::move(t);
  }
  absl::StatusOr<QuotaKeeper::Ticket> third =
      keeper_.AdmitSubscription(limited);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("2 Subscribe streams open; the limit is 2"));
  second.reset();
  EXPECT_OK(keeper_.AdmitSubscription(limited));  // and gone again at once
  EXPECT_OK(keeper_.AdmitSubscription(limited));
}

TEST_F(QuotaKeeperTest, RefusalsAndUseAreCountedPerPrincipal) {
  const Caller limited = As("limited");
  for (int i = 0; i < 6; ++i) (void)Jobs(limited, {"x"});
  clock_.AdvanceMs(1000);
  (void)keeper_.AdmitJobs(limited, {{"big.a", 600}, {"y", 50}});
  (void)keeper_.AdmitJobs(limited, {{"big.a", 1001}});
  std::string text;
  for (const auto& family : registry_.Collect()) {
    for (const auto& metric : family.metric) {
      std::string labels;
      for (const auto& l : metric.label) {
        absl::StrAppend(&labels, l.name, "=", l.value, ",");
      }
      absl::StrAppend(&text, family.name, "{", labels, "} ",
                      metric.counter.value, "\n");
    }
  }
  EXPECT_THAT(text, HasSubstr("delayd_principal_jobs_admitted_total{"
                              "principal=limited,} 6"));
  EXPECT_THAT(text, HasSubstr("delayd_principal_payload_bytes_admitted_total{"
                              "principal=limited,} 650"));
  EXPECT_THAT(text, HasSubstr("delayd_quota_refusals_total{principal=limited,"
                              "quota=pending_bytes,} 1"));
  EXPECT_THAT(text, HasSubstr("delayd_quota_refusals_total{principal=limited,"
                              "quota=schedules_per_second,} 2"));
}

}  // namespace
}  // namespace delayd::server
