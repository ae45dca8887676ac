// End-to-end tests of delayctl: the real `delayctl` binary against the real
// `delayd`, every command, --json output parsed back into the API's reply
// messages, exit codes and one-line errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpc/health/v1/health.pb.h"
#include "gtest/gtest.h"
#include "tests/client/delayctl/cli_process.h"
#include "tests/client/delayctl/delayctl_fixture.h"
#include "tests/support/dropping_proxy.h"
#include "tests/support/poll.h"
#include "tests/support/server_process.h"

namespace delayd::testing {
namespace {

using ::testing::HasSubstr;

class DelayctlTest : public DelayctlServerTest {
 protected:
  // Polls `stats TOPIC --json` until the topic has `n` subscribers.
  static bool WaitSubscribers(const std::string& topic, uint32_t n) {
    return PollUntil(
        [&] {
          CliResult r = Ctl({"stats", topic, "--json"});
          if (r.exit_code != 0) return false;
          auto stats = FromJson<v1::GetStatsResponse>(r.out);
          return stats.topics_size() == 1 && stats.topics(0).subscribers() == n;
        },
        absl::Seconds(30), absl::Milliseconds(20));
  }
};

TEST_F(DelayctlTest, ScheduleAndGetRoundTripThroughJson) {
  const absl::Time before = absl::Now();
  CliResult r = Ctl({"schedule", "orders.close", "30m", "hello", "--id",
                     "order-1", "--label", "shop=7", "--label", "kind=test",
                     "--max-attempts", "3", "--lease", "5s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  auto scheduled = FromJson<v1::ScheduleResponse>(r.out);
  EXPECT_TRUE(scheduled.created());
  const v1::Job& job = scheduled.job();
  EXPECT_EQ(job.topic(), "orders.close");
  EXPECT_EQ(job.id(), "order-1");
  EXPECT_EQ(job.payload(), "hello");
  EXPECT_EQ(job.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(job.labels().at("shop"), "7");
  EXPECT_EQ(job.labels().at("kind"), "test");
  EXPECT_EQ(job.retry().max_attempts(), 3u);
  EXPECT_EQ(job.retry().lease().seconds(), 5);
  const absl::Time due = FromProto(job.fire_at());
  EXPECT_GE(due, before + absl::Minutes(30) - absl::Milliseconds(1));
  EXPECT_LE(due, absl::Now() + absl::Minutes(30));

  r = Ctl({"get", "orders.close", "order-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = FromJson<v1::Job>(r.out);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, job))
      << got.DebugString() << " vs " << job.DebugString();

  // Human output: aligned fields, relative and absolute due time.
  r = Ctl({"get", "orders.close", "order-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("state     SCHEDULED\n"));
  EXPECT_THAT(r.out, HasSubstr("due       in 29m"));
  EXPECT_THAT(r.out, HasSubstr("attempts  0 of 3\n"));
  EXPECT_THAT(r.out, HasSubstr("labels    kind=test, shop=7\n"));
  EXPECT_THAT(r.out, HasSubstr("payload   \"hello\"\n"));

  r = Ctl({"get", "orders.close", "order-1", "--raw-payload"});
  EXPECT_EQ(r.out, "hello");

  r = Ctl({"get", "orders.close", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
}

TEST_F(DelayctlTest, ScheduleAtAbsoluteTimeWithPayloadFromFileAndStdin) {
  CliResult r = Ctl(
      {"schedule", "abs", "2031-05-04T03:02:01.250Z", "--id", "a", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto scheduled = FromJson<v1::ScheduleResponse>(r.out);
  EXPECT_EQ(FromProto(scheduled.job().fire_at()),
            absl::FromCivil(absl::CivilSecond(2031, 5, 4, 3, 2, 1),
                            absl::UTCTimeZone()) +
                absl::Milliseconds(250));

  const std::string binary("\x00\x01\xff payload\n", 12);
  r = Ctl({"schedule", "abs", "1h", "-", "--id", "stdin", "--json"}, binary);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ScheduleResponse>(r.out).job().payload(), binary);

  const std::string path = MakeTempDir() + "/payload.json";
  {
    std::ofstream f(path, std::ios::binary);
    f << "{\"order\": 8812}";
  }
  r = Ctl({"schedule", "abs", "1h30m", "--payload-file", path, "--id", "file",
           "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ScheduleResponse>(r.out).job().payload(),
            "{\"order\": 8812}");

  // Human output says what happened and when.
  r = Ctl({"schedule", "abs", "2h", "x", "--id", "human"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      absl::StartsWith(r.out, "scheduled  abs/human  SCHEDULED  due in 1h59m"))
      << r.out;
}

TEST_F(DelayctlTest, IfExistsFailKeepReplace) {
  ASSERT_EQ(Ctl({"schedule", "ifx", "1h", "one", "--id", "k"}).exit_code, 0);
  CliResult r = Ctl({"schedule", "ifx", "1h", "two", "--id", "k"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));

  r = Ctl({"schedule", "ifx", "1h", "two", "--id", "k", "--if-exists", "keep"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "unchanged  ifx/k")) << r.out;

  r = Ctl({"schedule", "ifx", "5m", "two", "--id", "k", "--if-exists",
           "replace", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto replaced = FromJson<v1::ScheduleResponse>(r.out);
  EXPECT_TRUE(replaced.created());
  EXPECT_EQ(replaced.job().payload(), "two");
}

TEST_F(DelayctlTest, ListFollowsPagesWithFiltersAndLimit) {
  for (int i = 0; i < 25; ++i) {
    char id[8];
    std::snprintf(id, sizeof(id), "j%02d", i);
    const CliResult scheduled =
        Ctl({"schedule", "listing", absl::StrCat(i + 1, "m"), "p", "--id", id});
    ASSERT_EQ(scheduled.exit_code, 0) << scheduled.err << "\nserver log:\n"
                                      << server_->Log();
  }
  CliResult r =
      Ctl({"list", "listing", "--page-size", "7", "--limit", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto all = FromJson<v1::ListJobsResponse>(r.out);
  ASSERT_EQ(all.jobs_size(), 25);
  for (int i = 0; i < 25; ++i) {
    char id[8];
    std::snprintf(id, sizeof(id), "j%02d", i);
    EXPECT_EQ(all.jobs(i).id(), id);
  }
  EXPECT_EQ(all.next_page_token(), "");

  r = Ctl({"list", "listing", "--limit", "10", "--page-size", "7", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto limited = FromJson<v1::ListJobsResponse>(r.out);
  EXPECT_EQ(limited.jobs_size(), 10);
  EXPECT_NE(limited.next_page_token(), "");

  r = Ctl({"list", "listing", "--prefix", "j1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r.out).jobs_size(), 10);
  r = Ctl({"list", "listing", "--due-before", "5m30s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r.out).jobs_size(), 5);
  r = Ctl({"list", "listing", "--state", "dead,ready", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r.out).jobs_size(), 0);
  r = Ctl({"list", "listing", "--state", "scheduled", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(r.out).jobs_size(), 25);

  r = Ctl({"list", "listing", "--limit", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  ASSERT_GE(lines.size(), 5u) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "ID   STATE      DUE")) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[1], "j00  SCHEDULED  in ")) << r.out;
  EXPECT_THAT(lines[4], HasSubstr("3 jobs shown; more exist"));

  r = Ctl({"list", "listing", "--state", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r);
}

TEST_F(DelayctlTest, CancelCancelPrefixAndReschedule) {
  for (const char* id : {"o-1", "o-2", "o-3", "p-1"}) {
    ASSERT_EQ(Ctl({"schedule", "cx", "1h", "p", "--id", id}).exit_code, 0);
  }
  CliResult r = Ctl({"cancel", "cx", "o-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto canceled = FromJson<v1::CancelResponse>(r.out);
  EXPECT_EQ(canceled.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(canceled.job().id(), "o-1");
  r = Ctl({"cancel", "cx", "o-2"});
  EXPECT_EQ(r.out, "canceled cx/o-2: it will not be delivered\n");

  r = Ctl({"cancel", "cx", "o-1", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(FromJson<v1::CancelResponse>(r.out).outcome(),
            v1::CANCEL_OUTCOME_NOT_FOUND);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("cx/o-1 not found"));

  r = Ctl({"cancel-prefix", "cx", "o-", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::CancelByPrefixResponse>(r.out).canceled(), 1u);
  r = Ctl({"cancel-prefix", "cx", "o-"});
  EXPECT_EQ(r.out, "canceled 0 jobs of cx with ids starting 'o-'\n");

  const absl::Time before = absl::Now();
  r = Ctl({"reschedule", "cx", "p-1", "2h", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const absl::Time due =
      FromProto(FromJson<v1::RescheduleResponse>(r.out).job().fire_at());
  EXPECT_GE(due, before + absl::Hours(2) - absl::Milliseconds(1));
  EXPECT_LE(due, absl::Now() + absl::Hours(2));
  r = Ctl({"reschedule", "cx", "p-1", "2031-01-01T00:00:00Z"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(2031-01-01 00:00:00Z)"));

  r = Ctl({"reschedule", "cx", "o-1", "1m"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
}

TEST_F(DelayctlTest, SubscribeWithAckReceivesAScheduledJob) {
  CliProcess sub(
      WithServer({"subscribe", "fire", "--ack", "--count", "1", "--json"}));
  ASSERT_TRUE(WaitSubscribers("fire", 1));
  CliResult r = Ctl({"schedule", "fire", "300ms", "ding", "--id", "f-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CliResult s = sub.Wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err, "");
  auto delivery = FromJson<v1::Delivery>(s.out);
  EXPECT_EQ(delivery.job().id(), "f-1");
  EXPECT_EQ(delivery.job().payload(), "ding");
  EXPECT_EQ(delivery.attempt(), 1u);
  EXPECT_NE(delivery.ack_token(), "");
  // Acked: the job is gone.
  EXPECT_EQ(Ctl({"get", "fire", "f-1"}).exit_code, 1);

  // Human lines: time, key, attempt, lateness, payload, what was done.
  CliProcess human(WithServer({"subscribe", "fire", "--ack", "--count", "2"}));
  ASSERT_TRUE(WaitSubscribers("fire", 1));
  ASSERT_EQ(Ctl({"schedule", "fire", "now", "a", "--id", "f-2"}).exit_code, 0);
  ASSERT_EQ(Ctl({"schedule", "fire", "now", "b", "--id", "f-3"}).exit_code, 0);
  s = human.Wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  std::vector<std::string> lines =
      absl::StrSplit(s.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << s.out;
  EXPECT_THAT(lines[0], HasSubstr("  fire/f-2  attempt 1/10  late "));
  EXPECT_TRUE(absl::EndsWith(lines[0], "  \"a\"  acked")) << lines[0];
  EXPECT_THAT(lines[1], HasSubstr("  fire/f-3  attempt 1/10  late "));
}

TEST_F(DelayctlTest, NackExtendLeaseRedriveAndStopOnSigint) {
  CliProcess sub(WithServer({"subscribe", "dl", "--json"}));
  ASSERT_TRUE(WaitSubscribers("dl", 1));
  ASSERT_EQ(Ctl({"schedule", "dl", "now", "x", "--id", "d-1"}).exit_code, 0);
  std::string line;
  PollUntil(
      [&] {
        line = sub.Out();
        return line.find('\n') != std::string::npos;
      },
      absl::Seconds(30));
  ASSERT_NE(line.find('\n'), std::string::npos) << "no delivery";
  const std::string token =
      FromJson<v1::Delivery>(line.substr(0, line.find('\n'))).ack_token();

  CliResult r = Ctl({"extend-lease", token, "2m", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const absl::Time lease =
      FromProto(FromJson<v1::ExtendLeaseResponse>(r.out).lease_expires_at());
  EXPECT_GT(lease, absl::Now() + absl::Seconds(90));

  r = Ctl(
      {"nack", token, "--dead-letter", "--reason", "bad payload", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto nacked = FromJson<v1::NackResponse>(r.out);
  EXPECT_EQ(nacked.job().state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(nacked.job().last_error(), "bad payload");

  // The token is spent: ack refuses it, one line, exit 1.
  r = Ctl({"ack", token});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("FAILED"));
  ExpectOneErrorLine(r);

  sub.Signal(SIGINT);
  CliResult s = sub.Wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err, "");

  r = Ctl({"redrive", "dl", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<v1::RedriveResponse>(r.out).redriven(), 1u);
  r = Ctl({"get", "dl", "d-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto job = FromJson<v1::Job>(r.out);
  EXPECT_NE(job.state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job.attempts(), 0u);
}

TEST_F(DelayctlTest, StatsAndHealth) {
  ASSERT_EQ(Ctl({"schedule", "st", "30s", "p", "--id", "1"}).exit_code, 0);
  ASSERT_EQ(Ctl({"schedule", "st", "2h", "p", "--id", "2"}).exit_code, 0);
  CliResult r = Ctl({"stats", "st", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto stats = FromJson<v1::GetStatsResponse>(r.out);
  ASSERT_EQ(stats.topics_size(), 1);
  EXPECT_EQ(stats.topics(0).scheduled(), 2u);
  EXPECT_EQ(stats.topics(0).due_next_minute(), 1u);
  EXPECT_EQ(stats.topics(0).due_next_day(), 2u);

  r = Ctl({"stats", "st"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "TOPIC  SCHEDULED  READY  IN_FLIGHT  DEAD  SUBSCRIBERS  DUE_1M  "
            "DUE_1H  DUE_1D\n"
            "st     2          0      0          0     0            1       "
            "1       2\n");

  r = Ctl({"health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Ctl({"health", "--service", "delayd.v1.DelayQueue", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FromJson<grpc::health::v1::HealthCheckResponse>(r.out).status(),
            grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(DelayctlTest, PreviewShowsOccurrencesInUtcAndLocalTime) {
  // New York's 2026 spring-forward gap: 02:30 fires at 03:00 EDT.
  CliResult r =
      Ctl({"preview", "--cron", "0 30 2 * * ?", "--tz", "America/New_York",
           "--after", "2026-03-07T00:00:00Z", "--count", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "UTC                       LOCAL\n"
            "2026-03-07 07:30:00.000Z  2026-03-07T02:30:00-05:00\n"
            "2026-03-08 07:00:00.000Z  2026-03-08T03:00:00-04:00\n"
            "2026-03-09 06:30:00.000Z  2026-03-09T02:30:00-04:00\n");
  r = Ctl({"preview", "--every", "90s", "--anchor", "2026-01-01T00:00:00Z",
           "--after", "2026-01-01T00:00:00Z", "--count", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto every = FromJson<v1::PreviewScheduleResponse>(r.out);
  ASSERT_EQ(every.occurrences_size(), 2);
  EXPECT_EQ(every.occurrences(1).local_time(), "2026-01-01T00:03:00+00:00");
  r = Ctl({"preview", "--cron", "*/5 * * * *", "--dialect", "unix", "--after",
           "2026-01-01T00:00:00Z", "--count", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("2026-01-01T00:05:00+00:00"));
  // Refusals: the server's names the position; delayctl's own, the flag.
  r = Ctl({"preview", "--cron", "0 0 25 * * ?"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("recurrence.cron.expression: at "
                                          "position 5 (hour field"));
  r = Ctl({"preview", "--cron", "0 0 0 * * ?", "--every", "1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("give one of --cron EXPR"));
  r = Ctl({"preview", "--cron", "0 0 0 * * ?", "--dialect", "vixie"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--dialect: 'vixie'"));
}

TEST_F(DelayctlTest, ServerFromEnvironment) {
  CliResult r =
      RunCli({"health"}, "", {"DELAYD_SERVER=" + server_->grpc_address()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
}

// gRPC 1.51 reads connect(2)'s errno only after other calls that may change
// it (fixed upstream in grpc/grpc#35064): on a machine without /sys, glibc's
// first malloc arena setup leaves ENOENT there, and a connection attempt that
// was in progress fails as "No such file or directory". Seen as a delayctl
// call exiting 3 against a healthy server (metrics_promtool on a fresh
// machine). A failed connection attempt carried no request, so delayctl
// tries again within its --timeout; every command goes through Session.
TEST_F(DelayctlTest, AFailedFirstConnectionAttemptIsTriedAgain) {
  const std::string& address = server_->grpc_address();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  ASSERT_EQ(Ctl({"schedule", "retry.due", "now", "x"}).exit_code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"health"},
        std::vector<std::string>{"schedule", "retry.connect", "1h", "x"},
        std::vector<std::string>{"stats", "retry.connect"},
        std::vector<std::string>{"subscribe", "retry.due", "--count", "1",
                                 "--ack"}}) {
    DroppingProxy proxy(port, /*drop=*/1);
    std::vector<std::string> argv = args;
    argv.insert(argv.begin(),
                absl::StrCat("--server=127.0.0.1:", proxy.port()));
    CliResult r = RunCli(argv);
    EXPECT_EQ(r.exit_code, 0) << argv[1] << ": " << r.err;
    EXPECT_GE(proxy.accepted(), 2) << argv[1];
  }
}

TEST(DelayctlUsageTest, UnreachableServerFailsFastWithOneLine) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--server", "127.0.0.1:1", "stats"},
        std::vector<std::string>{"get", "t", "i", "--server=127.0.0.1:1"},
        std::vector<std::string>{"--server=127.0.0.1:1", "subscribe", "t"},
        std::vector<std::string>{"--server=no-such-host.invalid:7400",
                                 "--timeout=3s", "health"}}) {
    const absl::Time start = absl::Now();
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(r.out, "");
    ExpectOneErrorLine(r);
    EXPECT_THAT(r.err, HasSubstr("server"));
    // Bounded by --timeout (10 s by default), never a hang.
    EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  }
}

// A server that accepts TCP connections but never speaks HTTP/2 (a hung
// process, a wrong port behind a load balancer): the call must end at
// --timeout, not wait for gRPC's 20 s connect timeout or forever.
TEST(DelayctlUsageTest, SilentServerFailsAtTheTimeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 16), 0);  // the kernel completes handshakes; no reply
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string server =
      absl::StrCat("--server=127.0.0.1:", ntohs(addr.sin_port));
  for (const char* command : {"stats", "subscribe"}) {
    const absl::Time start = absl::Now();
    CliResult r = RunCli({server, "--timeout=2s", command, "t"});
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(r.exit_code, 3) << command << ": " << r.err;
    ExpectOneErrorLine(r);
    EXPECT_THAT(r.err, HasSubstr("within 2s")) << command;
    EXPECT_GE(took, absl::Seconds(2)) << command;
    EXPECT_LT(took, absl::Seconds(15)) << command;
  }
  close(fd);
}

TEST(DelayctlUsageTest, BadCommandLinesExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"stats", "--bogus"},
        std::vector<std::string>{"--bogus", "stats"},
        std::vector<std::string>{"frobnicate"}, std::vector<std::string>{},
        std::vector<std::string>{"get", "only-topic"},
        std::vector<std::string>{"schedule", "t"},
        std::vector<std::string>{"schedule", "t", "soonish"},
        std::vector<std::string>{"schedule", "t", "-5m"},
        std::vector<std::string>{"schedule", "t", "1m", "--if-exists", "x"},
        std::vector<std::string>{"schedule", "t", "1m", "--label", "nokey"},
        std::vector<std::string>{"list", "t", "--limit", "many"},
        std::vector<std::string>{"stats", "--timeout", "forever"},
        std::vector<std::string>{"subscribe"}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
    EXPECT_EQ(r.out, "");
    ExpectOneErrorLine(r);
  }
  CliResult r = RunCli({"stats", "--bogus"});
  EXPECT_EQ(r.err,
            "delayctl: unknown flag --bogus (see delayctl stats --help)\n");
}

TEST(DelayctlUsageTest, HelpEverywhere) {
  CliResult r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* command :
       {"schedule", "preview", "get", "list", "cancel", "cancel-prefix",
        "reschedule", "pause", "resume", "subscribe", "ack", "nack",
        "extend-lease", "redrive", "stats", "health"}) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("  ", command, " ")));
    CliResult c = RunCli({command, "--help"});
    EXPECT_EQ(c.exit_code, 0) << command;
    EXPECT_TRUE(
        absl::StartsWith(c.out, absl::StrCat("usage: delayctl ", command)))
        << c.out;
    EXPECT_THAT(c.out, HasSubstr("--server HOST:PORT"));
  }
  EXPECT_THAT(r.out, HasSubstr("exit codes:"));
  EXPECT_THAT(RunCli({"schedule", "-h"}).out, HasSubstr("--payload-file"));
}

}  // namespace
}  // namespace delayd::testing
