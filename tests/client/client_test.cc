// End to end: every call of delayd::client::Client against the real binary,
// per-call deadlines, and which calls are retried on UNAVAILABLE (counted by
// a client interceptor while the server is down).
#include "delayd/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"
#include "tests/support/dropping_proxy.h"

namespace delayd::testing {
namespace {

using client::CallOptions;
using client::Client;
using client::JobAfter;
using client::JobAt;

TEST_F(ClientTest, ScheduleCreatesAndAnIdenticalRetryReturnsTheJob) {
  auto first = client_->Schedule(JobAfter("t", "a", "pay", absl::Hours(1)));
  ASSERT_OK(first);
  EXPECT_TRUE(first->created());
  EXPECT_EQ(first->job().state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(first->job().payload(), "pay");
  auto again = client_->Schedule(JobAfter("t", "a", "pay", absl::Hours(1)));
  ASSERT_OK(again);
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->job().fire_at().seconds(), first->job().fire_at().seconds());
}

TEST_F(ClientTest, ScheduleIfExistsFailKeepReplace) {
  ASSERT_OK(client_->Schedule(JobAfter("t", "a", "one", absl::Hours(1))));
  EXPECT_EQ(client_->Schedule(JobAfter("t", "a", "two", absl::Hours(1)))
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  auto kept = client_->Schedule(JobAfter("t", "a", "two", absl::Hours(1)),
                                v1::IF_EXISTS_KEEP);
  ASSERT_OK(kept);
  EXPECT_FALSE(kept->created());
  EXPECT_EQ(kept->job().payload(), "one");
  auto replaced = client_->Schedule(JobAfter("t", "a", "two", absl::Hours(2)),
                                    v1::IF_EXISTS_REPLACE);
  ASSERT_OK(replaced);
  EXPECT_TRUE(replaced->created());
  EXPECT_EQ(replaced->job().payload(), "two");
}

TEST_F(ClientTest, ScheduleWithoutIdGetsOneAndBadInputNamesTheField) {
  auto made = client_->Schedule(JobAfter("t", "", "x", absl::Hours(1)));
  ASSERT_OK(made);
  EXPECT_FALSE(made->job().id().empty());
  absl::Status bad =
      client_->Schedule(JobAfter("bad topic!", "a", "x", absl::Hours(1)))
          .status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("topic"), absl::string_view::npos) << bad;
}

TEST_F(ClientTest, ScheduleAtAnAbsoluteTime) {
  const absl::Time at =
      absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now() + absl::Hours(5)));
  auto made = client_->Schedule(JobAt("t", "at", "", at));
  ASSERT_OK(made);
  EXPECT_EQ(client::FromProto(made->job().fire_at()), at);
}

TEST_F(ClientTest, ScheduleBatchGivesOneResultPerRequest) {
  std::vector<v1::ScheduleRequest> requests(3);
  *requests[0].mutable_job() = JobAfter("t", "b0", "", absl::Hours(1));
  *requests[1].mutable_job() = JobAfter("bad topic!", "b1", "", absl::Hours(1));
  *requests[2].mutable_job() = JobAfter("t", "b2", "", absl::Hours(1));
  auto results = client_->ScheduleBatch(requests);
  ASSERT_OK(results);
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[0].code(), 0);
  EXPECT_TRUE((*results)[0].created());
  EXPECT_EQ((*results)[1].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ((*results)[2].job().id(), "b2");
  EXPECT_EQ(client_->ScheduleBatch({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, RescheduleByDelayAndByTime) {
  ASSERT_OK(client_->Schedule(JobAfter("t", "r", "", absl::Hours(1))));
  const absl::Time before = absl::Now();
  auto moved = client_->Reschedule("t", "r", absl::Hours(3));
  ASSERT_OK(moved);
  EXPECT_GE(client::FromProto(moved->fire_at()),
            before + absl::Hours(3) - absl::Milliseconds(1));
  const absl::Time at =
      absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now() + absl::Hours(7)));
  auto moved_at = client_->Reschedule("t", "r", at);
  ASSERT_OK(moved_at);
  EXPECT_EQ(client::FromProto(moved_at->fire_at()), at);
  EXPECT_EQ(client_->Reschedule("t", "nope", absl::Hours(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, CancelSaysWhatHappened) {
  ASSERT_OK(client_->Schedule(JobAfter("t", "c", "", absl::Hours(1))));
  auto canceled = client_->Cancel("t", "c");
  ASSERT_OK(canceled);
  EXPECT_EQ(canceled->outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(canceled->job().id(), "c");
  auto again = client_->Cancel("t", "c");
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  EXPECT_EQ(client_->GetJob("t", "c").status().code(),
            absl::StatusCode::kNotFound);
}

// A connection attempt that fails sent nothing, so every call, also the
// ones never retried (Cancel, Schedule without an id), waits for the next
// attempt. Before, a first attempt that failed (gRPC 1.51 can fail one that
// was in progress, grpc/grpc#35064) came back to Cancel as UNAVAILABLE.
TEST_F(ClientTest, CallsThatAreNeverRetriedOutlastAFailedConnectionAttempt) {
  ASSERT_OK(client_->Schedule(JobAfter("t", "d", "", absl::Hours(1))));
  const int port = std::stoi(address_.substr(address_.rfind(':') + 1));
  DroppingProxy cancel_proxy(port, /*drop=*/1);
  client::ClientOptions options = Options();
  options.target = absl::StrCat("127.0.0.1:", cancel_proxy.port());
  auto canceled = client::Client(options).Cancel("t", "d");
  ASSERT_OK(canceled);
  EXPECT_EQ(canceled->outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_GE(cancel_proxy.accepted(), 2);

  DroppingProxy schedule_proxy(port, /*drop=*/1);
  options.target = absl::StrCat("127.0.0.1:", schedule_proxy.port());
  auto scheduled =
      client::Client(options).Schedule(JobAfter("t", "", "", absl::Hours(1)));
  ASSERT_OK(scheduled);
  EXPECT_TRUE(scheduled->created());
  EXPECT_GE(schedule_proxy.accepted(), 2);
}

TEST_F(ClientTest, CancelByPrefixCountsAndLeavesTheRest) {
  for (const char* id : {"o1-a", "o1-b", "o1-c", "o2-a"}) {
    ASSERT_OK(client_->Schedule(JobAfter("t", id, "", absl::Hours(1))));
  }
  auto n = client_->CancelByPrefix("t", "o1-");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 3u);
  ASSERT_OK(client_->GetJob("t", "o2-a"));
}

TEST_F(ClientTest, GetJobAndListJobsAcrossPages) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_OK(client_->Schedule(
        JobAfter("list", absl::StrCat("j", 100 + i), "p", absl::Hours(1))));
  }
  auto job = client_->GetJob("list", "j105");
  ASSERT_OK(job);
  EXPECT_EQ(job->payload(), "p");
  EXPECT_EQ(job->state(), v1::JOB_STATE_SCHEDULED);

  v1::ListJobsRequest query;
  query.set_topic("list");
  query.set_page_size(10);
  auto page = client_->ListJobs(query);
  ASSERT_OK(page);
  EXPECT_EQ(page->jobs_size(), 10);
  EXPECT_FALSE(page->next_page_token().empty());
  auto all = client_->ListAllJobs(query);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 25u);
  EXPECT_EQ((*all)[0].id(), "j100");
  EXPECT_EQ((*all)[24].id(), "j124");
}

TEST_F(ClientTest, SubscribeAckNackExtendLeaseRedrive) {
  std::unique_ptr<client::DeliveryStream> stream =
      client_->Subscribe("s", "test", 10);
  for (const char* id : {"ack", "nack", "dead"}) {
    ASSERT_OK(client_->Schedule(JobAfter("s", id, "", absl::ZeroDuration())));
  }
  absl::flat_hash_map<std::string, v1::Delivery> got;
  v1::Delivery d;
  while (got.size() < 3 && stream->Next(&d)) got[d.job().id()] = d;
  ASSERT_EQ(got.size(), 3u);

  auto extended =
      client_->ExtendLease(got["ack"].ack_token(), absl::Minutes(5));
  ASSERT_OK(extended);
  EXPECT_GT(*extended, absl::Now() + absl::Minutes(4));
  auto acked = client_->Ack({got["ack"].ack_token(), "not-a-token"});
  ASSERT_OK(acked);
  ASSERT_EQ(acked->size(), 2u);
  EXPECT_EQ((*acked)[0].code(), 0);
  EXPECT_EQ((*acked)[1].code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Acked: the lease is over.
  EXPECT_FALSE(
      client_->ExtendLease(got["ack"].ack_token(), absl::Minutes(1)).ok());

  auto nacked = client_->Nack(got["nack"].ack_token(), absl::Hours(1), "later");
  ASSERT_OK(nacked);
  EXPECT_EQ(nacked->last_error(), "later");
  EXPECT_EQ(nacked->state(), v1::JOB_STATE_SCHEDULED);
  auto dead = client_->Nack(got["dead"].ack_token(), std::nullopt, "broken",
                            /*dead_letter=*/true);
  ASSERT_OK(dead);
  EXPECT_EQ(dead->state(), v1::JOB_STATE_DEAD);

  auto redriven = client_->Redrive("s", "");
  ASSERT_OK(redriven);
  EXPECT_EQ(*redriven, 1u);
  ASSERT_TRUE(stream->Next(&d));
  EXPECT_EQ(d.job().id(), "dead");
  stream->Cancel();
  while (stream->Next(&d)) {
  }
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kCancelled);
}

TEST_F(ClientTest, SubscribeRefusalShowsInFinish) {
  std::unique_ptr<client::DeliveryStream> stream =
      client_->Subscribe("bad topic!", "test", 10);
  v1::Delivery d;
  EXPECT_FALSE(stream->Next(&d));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, GetStatsAndHealth) {
  ASSERT_OK(client_->Schedule(JobAfter("st1", "a", "", absl::Seconds(30))));
  ASSERT_OK(client_->Schedule(JobAfter("st2", "a", "", absl::Hours(2))));
  auto one = client_->GetStats("st1");
  ASSERT_OK(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].scheduled(), 1u);
  EXPECT_EQ((*one)[0].due_next_minute(), 1u);
  auto all = client_->GetStats();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].topic(), "st2");
  EXPECT_OK(client_->CheckHealth());
}

// A listener that never answers: gRPC's handshake waits, so a call can only
// end by its deadline.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen";
    }
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~SilentListener() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_;
  std::string address_;
};

TEST_F(ClientTest, PerCallDeadlineOverridesTheDefault) {
  SilentListener silent;
  client::ClientOptions options = Options();
  options.target = silent.address();
  options.default_deadline = absl::Milliseconds(300);
  Client stuck(options);
  absl::Time start = absl::Now();
  EXPECT_EQ(stuck.GetStats().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(20));
  CallOptions longer;
  longer.deadline = absl::Milliseconds(1500);
  start = absl::Now();
  EXPECT_EQ(stuck.GetStats("", longer).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1500));
  // Over the ScheduleStream too, and not held by a write on a connection
  // that never completes (gRPC would give it up only at the 5 s connect
  // timeout).
  for (const std::function<absl::Status()>& call :
       std::vector<std::function<absl::Status()>>{
           [&] {
             return stuck.Schedule(JobAfter("t", "d", "", absl::Hours(1)))
                 .status();
           },
           [&] { return stuck.Cancel("t", "d").status(); }}) {
    start = absl::Now();
    EXPECT_EQ(call().code(), absl::StatusCode::kDeadlineExceeded);
    took = absl::Now() - start;
    EXPECT_GE(took, absl::Milliseconds(300));
    EXPECT_LT(took, absl::Seconds(3));
  }
}

// Counts the attempts of every method that go through the channel.
class AttemptCounter {
 public:
  void Add(const std::string& method) {
    absl::MutexLock lock(&mu_);
    ++counts_[method.substr(method.rfind('/') + 1)];
  }
  int Of(const std::string& method) {
    absl::MutexLock lock(&mu_);
    return counts_[method];
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

class CountingInterceptor : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(grpc::experimental::ClientRpcInfo* info,
                      AttemptCounter* counter)
      : method_(info->method()), counter_(counter) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      counter_->Add(method_);
    }
    // Messages sent, under "METHOD#messages".
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      counter_->Add(method_ + "#messages");
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  AttemptCounter* const counter_;
};

class CountingFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit CountingFactory(AttemptCounter* counter) : counter_(counter) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new CountingInterceptor(info, counter_);
  }

 private:
  AttemptCounter* const counter_;
};

class ClientRetryTest : public ClientTest {
 protected:
  // A call that rides out a server restart: retried every 20-100 ms for up
  // to 60 s.
  static CallOptions Patient() {
    CallOptions patient;
    patient.deadline = absl::Seconds(60);
    client::RpcRetryPolicy many;
    many.max_attempts = 1000;
    many.initial_backoff = absl::Milliseconds(20);
    many.max_backoff = absl::Milliseconds(100);
    patient.retry = many;
    return patient;
  }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClientTest::SetUp());
    client::ClientOptions options = Options();
    options.retry.max_attempts = 3;
    options.retry.initial_backoff = absl::Milliseconds(10);
    options.retry.max_backoff = absl::Milliseconds(20);
    counted_ = Counted(options);
  }

  // A Client whose attempts and messages counter_ counts.
  std::unique_ptr<Client> Counted(const client::ClientOptions& options) {
    std::vector<
        std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
        factories;
    factories.push_back(std::make_unique<CountingFactory>(&counter_));
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
    return std::make_unique<Client>(
        grpc::experimental::CreateCustomChannelWithInterceptors(
            address_, grpc::InsecureChannelCredentials(), args,
            std::move(factories)),
        options);
  }

  AttemptCounter counter_;
  std::unique_ptr<Client> counted_;
};

TEST_F(ClientRetryTest, WhileTheServerIsDownOnlySafeCallsAreRetried) {
  ASSERT_OK(counted_->GetStats());  // connected once
  ASSERT_NO_FATAL_FAILURE(StopServer(SIGKILL));
  struct Case {
    std::string call;
    int want_attempts;
    std::function<absl::Status()> run;
  };
  // Schedule, Reschedule and Cancel go over a ScheduleStream, which is not
  // opened while the channel is not connected: their attempts show in the
  // status ("(after N attempts)"), not on the wire.
  std::vector<Case> cases = {
      {"Schedule", 3,
       [&] {
         return counted_->Schedule(JobAfter("t", "with-id", "", absl::Hours(1)))
             .status();
       }},
      // The server mints ids: a retry could create a second job.
      {"Schedule", 1,
       [&] {
         return counted_->Schedule(JobAfter("t", "", "", absl::Hours(1)))
             .status();
       }},
      {"Reschedule", 3,
       [&] { return counted_->Reschedule("t", "x", absl::Hours(2)).status(); }},
      {"Cancel", 1, [&] { return counted_->Cancel("t", "x").status(); }},
      {"GetJob", 3, [&] { return counted_->GetJob("t", "x").status(); }},
      {"Ack", 3, [&] { return counted_->Ack({"token"}).status(); }},
  };
  for (const Case& c : cases) {
    const bool streamed =
        c.call == "Schedule" || c.call == "Reschedule" || c.call == "Cancel";
    const int before = counter_.Of(c.call);
    const absl::Status status = c.run();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << c.call;
    if (streamed) {
      EXPECT_EQ(absl::StrContains(status.message(), "(after"),
                c.want_attempts > 1)
          << c.call << " " << status;
      if (c.want_attempts > 1) {
        EXPECT_TRUE(absl::StrContains(
            status.message(),
            absl::StrCat("(after ", c.want_attempts, " attempts)")))
            << c.call << " " << status;
      }
    } else {
      EXPECT_EQ(counter_.Of(c.call) - before, c.want_attempts)
          << c.call << " " << status;
    }
  }
  EXPECT_EQ(counter_.Of("Schedule"), 0);
  // At most the first attempt, made before the channel saw the server go,
  // opened a stream.
  EXPECT_LE(counter_.Of("ScheduleStream"), 1);
  std::vector<v1::ScheduleRequest> mixed(2);
  *mixed[0].mutable_job() = JobAfter("t", "b", "", absl::Hours(1));
  *mixed[1].mutable_job() = JobAfter("t", "", "", absl::Hours(1));
  EXPECT_EQ(counted_->ScheduleBatch(mixed).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(counter_.Of("ScheduleBatch"), 1);
}

// Threads calling at once share the ScheduleStream's messages (linger
// holds the first for the others), and each gets exactly its own result: a
// duplicate id and an invalid job only in their own, as unary calls would.
TEST_F(ClientRetryTest, CallsSharingAMessageEachGetTheirOwnResult) {
  client::ClientOptions options = Options();
  options.linger = absl::Seconds(1);  // the most: the threads all join
  std::unique_ptr<Client> batching = Counted(options);
  constexpr int kThreads = 12;
  std::vector<v1::JobSpec> jobs;
  for (int i = 0; i < kThreads - 3; ++i) {
    jobs.push_back(JobAfter("shared", absl::StrCat("j", i), absl::StrCat(i),
                            absl::Hours(1)));
  }
  jobs.push_back(JobAfter("shared", "dup", "first", absl::Hours(1)));
  jobs.push_back(JobAfter("shared", "dup", "second", absl::Hours(1)));
  jobs.push_back(JobAfter("no spaces", "bad", "", absl::Hours(1)));
  std::vector<absl::StatusOr<v1::ScheduleResponse>> results(
      kThreads, absl::UnknownError("not run"));
  absl::Mutex mu;
  int ready = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        absl::MutexLock lock(&mu);
        ++ready;
        mu.Await(absl::Condition(
            +[](int* n) { return *n == kThreads; }, &ready));
      }
      results[i] = batching->Schedule(jobs[i]);
    });
  }
  for (std::thread& t : threads) t.join();

  // Fewer messages than calls: they were shared.
  EXPECT_LT(counter_.Of("ScheduleStream#messages"), kThreads);
  EXPECT_EQ(counter_.Of("Schedule"), 0);
  for (int i = 0; i < kThreads - 3; ++i) {
    ASSERT_OK(results[i]);
    EXPECT_TRUE(results[i]->created());
    EXPECT_EQ(results[i]->job().id(), jobs[i].id());
    EXPECT_EQ(results[i]->job().payload(), jobs[i].payload());
  }
  // One of the two duplicates made the job; the other is refused.
  const int dup = kThreads - 3;
  ASSERT_NE(results[dup].ok(), results[dup + 1].ok())
      << results[dup].status() << " / " << results[dup + 1].status();
  const int made = results[dup].ok() ? dup : dup + 1;
  EXPECT_EQ(results[made]->job().payload(), jobs[made].payload());
  EXPECT_EQ(results[dup + dup + 1 - made].status().code(),
            absl::StatusCode::kAlreadyExists);
  auto stored = client_->GetJob("shared", "dup");
  ASSERT_OK(stored);
  EXPECT_EQ(stored->payload(), jobs[made].payload());
  // The invalid job gets what a unary Schedule answers it.
  client::ClientOptions unary_options = Options();
  unary_options.schedule_stream = false;
  const absl::Status unary =
      Client(unary_options).Schedule(jobs.back()).status();
  EXPECT_EQ(unary.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results.back().status(), unary);
}

// A stream that breaks (the server restarts) fails nothing silently: the
// jobs OK'd before a SIGKILL are all there after it, and the next calls
// open a new stream and succeed.
TEST_F(ClientRetryTest, AfterASigkillTheOkJobsAreThereAndANewStreamOpens) {
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (counted_
                ->Schedule(JobAfter("kill", absl::StrCat(t, "-", i), "",
                                    absl::Hours(1)))
                .ok()) {
          ++ok[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter_.Of("ScheduleStream"), 1);
  ASSERT_NO_FATAL_FAILURE(StopServer(SIGKILL));
  ASSERT_NO_FATAL_FAILURE(StartServerAgain());
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(ok[t], 25) << t;
    for (int i = 0; i < ok[t]; ++i) {
      ASSERT_OK(client_->GetJob("kill", absl::StrCat(t, "-", i)));
    }
  }
  ASSERT_OK(counted_->Schedule(JobAfter("kill", "after", "", absl::Hours(1)),
                               v1::IF_EXISTS_FAIL, Patient()));
  EXPECT_GE(counter_.Of("ScheduleStream"), 2);
}

TEST_F(ClientRetryTest, ScheduleWithIdRidesOutARestart) {
  ASSERT_OK(client_->GetStats());
  ASSERT_NO_FATAL_FAILURE(StopServer(SIGTERM));
  std::atomic<bool> restarted{false};
  std::thread restarter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    StartServerAgain();
    restarted = true;
  });
  auto made = client_->Schedule(JobAfter("t", "survivor", "", absl::Hours(1)),
                                v1::IF_EXISTS_FAIL, Patient());
  restarter.join();
  ASSERT_TRUE(restarted);
  ASSERT_OK(made);
  EXPECT_TRUE(made->created());
  ASSERT_OK(client_->GetJob("t", "survivor"));
}

}  // namespace
}  // namespace delayd::testing
