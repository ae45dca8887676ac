// Access: who a call is from its Credentials, and what each rpc's request
// may touch (Authorize, Restrict). The same decisions serve gRPC and HTTP;
// tests/e2e/security_test.cc drives them through the real binary.
#include "server/core/access.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/auth_config.h"
#include "server/delivery/ack_token.h"
#include "tests/support/status_matchers.h"

namespace delayd::server {
namespace {

using ::testing::HasSubstr;

constexpr char kOrders[] = "orders-token";
constexpr char kOps[] = "ops-token";

// A file of this process's own: ctest runs each test of this file as a
// process of its own, two at a time, and a path they shared let one read the
// file while another was rewriting it ("unknown bearer token").
std::string WriteAuthFile() {
  const std::string path = absl::StrCat(::testing::TempDir(),
                                        "/access_test_auth.", getpid(), ".txt");
  std::ofstream(path) << "principal orders\n"
                      << "  token sha256:" << auth::Sha256Hex(kOrders) << "\n"
                      << "  identity orders-client\n"
                      << "  grant schedule,read orders.*\n"
                      << "  grant consume orders.close\n"
                      << "principal ops\n"
                      << "  token sha256:" << auth::Sha256Hex(kOps) << "\n"
                      << "  grant admin *\n";
  return path;
}

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(access_, Access::FromFile(WriteAuthFile()));
  }
  Caller As(const std::string& token) {
    Credentials credentials;
    const std::string header = "Bearer " + token;
    credentials.authorization = header;
    absl::StatusOr<Caller> caller = access_->Authenticate(credentials);
    EXPECT_TRUE(caller.ok()) << caller.status();
    return caller.value_or(Caller());
  }

  std::unique_ptr<Access> access_;
};

TEST_F(AccessTest, CredentialsNameAPrincipalOrAreRefused) {
  EXPECT_EQ(As(kOrders).name(), "orders");
  EXPECT_EQ(As(kOps).name(), "ops");
  auto code = [&](Credentials c) {
    return access_->Authenticate(c).status().code();
  };
  Credentials none;
  EXPECT_EQ(code(none), absl::StatusCode::kUnauthenticated);
  Credentials wrong;
  wrong.authorization = "Bearer nope";
  EXPECT_EQ(code(wrong), absl::StatusCode::kUnauthenticated);
  // The credentials borrow their header's text.
  const std::string token_scheme = absl::StrCat("Token ", kOrders);
  const std::string lower_case = absl::StrCat("bearer ", kOrders);
  Credentials scheme;
  scheme.authorization = token_scheme;
  EXPECT_EQ(code(scheme), absl::StatusCode::kUnauthenticated);
  Credentials empty;
  empty.authorization = "Bearer ";
  EXPECT_EQ(code(empty), absl::StatusCode::kUnauthenticated);
  // "bearer" in any case.
  Credentials lower;
  lower.authorization = lower_case;
  EXPECT_TRUE(access_->Authenticate(lower).ok());
  // A certificate: any of its identities may name the principal.
  Credentials cert;
  cert.identities = {"unknown.example", "orders-client"};
  ASSERT_OK_AND_ASSIGN(Caller by_cert, access_->Authenticate(cert));
  EXPECT_EQ(by_cert.name(), "orders");
  Credentials stranger;
  stranger.identities = {"stranger"};
  EXPECT_EQ(code(stranger), absl::StatusCode::kUnauthenticated);
  // A wrong token is refused even with a known certificate.
  cert.authorization = "Bearer nope";
  EXPECT_EQ(code(cert), absl::StatusCode::kUnauthenticated);
}

TEST_F(AccessTest, OpenAccessAllowsEverything) {
  Access open;
  ASSERT_OK_AND_ASSIGN(Caller caller, open.Authenticate(Credentials()));
  EXPECT_TRUE(caller.open());
  EXPECT_EQ(caller.name(), "-");
  v1::CancelByPrefixRequest request;
  request.set_topic("anything");
  std::string topic;
  EXPECT_OK(Authorize(caller, request, &topic));
  EXPECT_OK(open.Reload());
}

TEST_F(AccessTest, EachRpcChecksItsPermissionOnItsTopic) {
  const Caller orders = As(kOrders);
  std::string topic;
  v1::ScheduleRequest schedule;
  schedule.mutable_job()->set_topic("orders.close");
  EXPECT_OK(Authorize(orders, schedule, &topic));
  schedule.mutable_job()->set_topic("billing.x");
  absl::Status denied = Authorize(orders, schedule, &topic);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "principal 'orders' lacks schedule on topic 'billing.x'");
  EXPECT_EQ(topic, "billing.x");

  v1::CancelRequest cancel;
  cancel.mutable_key()->set_topic("orders.close");
  EXPECT_THAT(std::string(Authorize(orders, cancel, &topic).message()),
              HasSubstr("lacks cancel"));
  v1::SubscribeRequest subscribe;
  subscribe.set_topic("orders.close");
  EXPECT_OK(Authorize(orders, subscribe, &topic));
  subscribe.set_topic("orders.other");
  EXPECT_THAT(std::string(Authorize(orders, subscribe, &topic).message()),
              HasSubstr("lacks consume on topic 'orders.other'"));
  v1::RedriveRequest redrive;
  redrive.set_topic("orders.close");
  EXPECT_THAT(std::string(Authorize(orders, redrive, &topic).message()),
              HasSubstr("lacks admin"));
  EXPECT_OK(Authorize(As(kOps), redrive, &topic));

  // A batch is refused whole by its first topic outside the grants.
  v1::ScheduleBatchRequest batch;
  batch.add_requests()->mutable_job()->set_topic("orders.a");
  batch.add_requests()->mutable_job()->set_topic("billing.b");
  batch.add_requests()->mutable_job()->set_topic("billing.c");
  EXPECT_EQ(Authorize(orders, batch, &topic).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(topic, "billing.b");
}

TEST_F(AccessTest, AckTokensAreCheckedByTheirTopic) {
  const Caller orders = As(kOrders);
  AckToken own{"orders.close", "1", 1, 7, 0};
  AckToken other{"billing.x", "2", 1, 7, 0};
  std::string topic;
  v1::AckRequest ack;
  ack.add_ack_tokens(EncodeAckToken(own));
  ack.add_ack_tokens("not a token");  // the job service refuses it
  EXPECT_OK(Authorize(orders, ack, &topic));
  ack.add_ack_tokens(EncodeAckToken(other));
  EXPECT_THAT(std::string(Authorize(orders, ack, &topic).message()),
              HasSubstr("lacks consume on topic 'billing.x'"));
  v1::ExtendLeaseRequest extend;
  extend.set_ack_token(EncodeAckToken(other));
  EXPECT_EQ(Authorize(orders, extend, &topic).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AccessTest, StatsOfEveryTopicShowOnlyReadableOnes) {
  v1::GetStatsRequest request;
  v1::GetStatsResponse response;
  for (const char* t : {"billing.x", "orders.close", "orders.open"}) {
    response.add_topics()->set_topic(t);
  }
  response.mutable_due_soon()->add_per_minute(3);
  response.add_fire_lateness()->set_count(9);
  v1::GetStatsResponse for_ops = response;
  Restrict(As(kOps), request, &for_ops);
  EXPECT_EQ(for_ops.topics_size(), 3);
  EXPECT_TRUE(for_ops.has_due_soon());

  Restrict(As(kOrders), request, &response);
  ASSERT_EQ(response.topics_size(), 2);
  EXPECT_EQ(response.topics(0).topic(), "orders.close");
  EXPECT_EQ(response.topics(1).topic(), "orders.open");
  EXPECT_FALSE(response.has_due_soon());
  EXPECT_EQ(response.fire_lateness_size(), 0);
  // One readable topic's own stats are left whole.
  request.set_topic("orders.close");
  std::string topic;
  EXPECT_OK(Authorize(As(kOrders), request, &topic));
  request.set_topic("billing.x");
  EXPECT_EQ(Authorize(As(kOrders), request, &topic).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AccessTest, ReloadKeepsTheFileInUseWhenTheNewOneIsBad) {
  const Caller before = As(kOrders);
  std::ofstream(WriteAuthFile(), std::ios::trunc) << "principal x\n  fly\n";
  EXPECT_THAT(std::string(access_->Reload().message()), HasSubstr("line 2"));
  EXPECT_EQ(As(kOrders).name(), "orders");
  // A caller authenticated before a reload keeps its principal.
  WriteAuthFile();
  EXPECT_OK(access_->Reload());
  EXPECT_EQ(before.name(), "orders");
}

}  // namespace
}  // namespace delayd::server
