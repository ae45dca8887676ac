// End to end: delayd::client::Subscriber against the real binary — acks
// (batched, cross-checked with the server's rpc counter), nacks and
// redelivery, RetryAfter / DeadLetter, lease extension of a long handler,
// a server restart on the same port, and a clean Stop.
#include <signal.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "delayd/client.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace delayd::testing {
namespace {

using client::JobAfter;
using client::Subscriber;
using client::SubscriberOptions;

struct Seen {
  v1::Delivery delivery;
  absl::Time at;
};

// Every delivery a handler saw, thread-safe.
class Recorder {
 public:
  void Add(const v1::Delivery& d) {
    absl::MutexLock lock(&mu_);
    seen_.push_back({d, absl::Now()});
  }
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  size_t count() {
    absl::MutexLock lock(&mu_);
    return seen_.size();
  }
  std::set<std::string> ids() {
    absl::MutexLock lock(&mu_);
    std::set<std::string> ids;
    for (const Seen& s : seen_) ids.insert(s.delivery.job().id());
    return ids;
  }

 private:
  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
};

class SubscriberTest : public ClientTest {
 protected:
  SubscriberOptions Opts(const std::string& topic) {
    SubscriberOptions o;
    o.topic = topic;
    o.consumer = "test";
    o.reconnect_initial_backoff = absl::Milliseconds(50);
    o.reconnect_max_backoff = absl::Milliseconds(200);
    return o;
  }

  std::unique_ptr<Subscriber> MustStart(SubscriberOptions options,
                                        client::Handler handler) {
    auto sub = Subscriber::Start(client_.get(), std::move(options),
                                 std::move(handler));
    EXPECT_OK(sub);
    return sub.ok() ? std::move(*sub) : nullptr;
  }

  // Waits until `n` subscribers are registered on `topic`.
  bool WaitSubscribers(const std::string& topic, uint32_t n) {
    return Eventually([&] {
      auto stats = client_->GetStats(topic);
      return stats.ok() && !stats->empty() && (*stats)[0].subscribers() == n;
    });
  }

  // True once `topic` holds no live job.
  bool Drained(const std::string& topic) {
    auto stats = client_->GetStats(topic);
    if (!stats.ok()) return false;
    if (stats->empty()) return true;
    const v1::TopicStats& t = (*stats)[0];
    return t.scheduled() + t.ready() + t.in_flight() + t.dead() == 0;
  }

  void MustSchedule(const v1::JobSpec& spec) {
    ASSERT_OK(client_->Schedule(spec));
  }

  static v1::JobSpec WithRetry(v1::JobSpec spec, absl::Duration lease,
                               absl::Duration backoff) {
    *spec.mutable_retry()->mutable_lease() = client::ToProto(lease);
    *spec.mutable_retry()->mutable_initial_backoff() = client::ToProto(backoff);
    return spec;
  }
};

TEST_F(SubscriberTest, HandledDeliveriesAreAcked) {
  Recorder rec;
  auto sub = MustStart(Opts("ok"), [&](const v1::Delivery& d) {
    rec.Add(d);
    return absl::OkStatus();
  });
  for (int i = 0; i < 20; ++i) {
    MustSchedule(
        JobAfter("ok", absl::StrCat("j", i), "", absl::ZeroDuration()));
  }
  ASSERT_TRUE(Eventually([&] { return sub->stats().acked == 20; }))
      << sub->stats().acked;
  EXPECT_EQ(rec.ids().size(), 20u);
  EXPECT_TRUE(Eventually([&] { return Drained("ok"); }));
  EXPECT_EQ(sub->stats().handler_errors, 0u);
  EXPECT_EQ(sub->stats().ack_failures, 0u);
}

TEST_F(SubscriberTest, AcksAreBatchedUnderLoad) {
  constexpr int kJobs = 3000;
  auto sub = MustStart(Opts("load"),
                       [](const v1::Delivery&) { return absl::OkStatus(); });
  ASSERT_TRUE(WaitSubscribers("load", 1));
  for (int b = 0; b < kJobs / 1000; ++b) {
    std::vector<v1::ScheduleRequest> batch(1000);
    for (int i = 0; i < 1000; ++i) {
      *batch[i].mutable_job() = JobAfter(
          "load", absl::StrCat("j", b * 1000 + i), "", absl::ZeroDuration());
    }
    ASSERT_OK(client_->ScheduleBatch(batch));
  }
  ASSERT_TRUE(Eventually([&] { return sub->stats().acked == kJobs; },
                         absl::Seconds(60)))
      << sub->stats().acked;
  const client::SubscriberStats stats = sub->stats();
  EXPECT_EQ(stats.ack_failures, 0u);
  EXPECT_EQ(stats.deliveries, static_cast<uint64_t>(kJobs));
  ASSERT_GT(stats.ack_rpcs, 0u);
  const double per_rpc = static_cast<double>(stats.acked) / stats.ack_rpcs;
  std::printf("acks: %d deliveries in %llu Ack rpcs (%.1f per rpc)\n", kJobs,
              static_cast<unsigned long long>(stats.ack_rpcs), per_rpc);
  EXPECT_GE(per_rpc, 10.0);
  // The server counted the same rpcs: this test's own client sent no Ack.
  const std::string scrape = ScrapeMetrics(server_->http_address());
  const double server_acks =
      MetricValue(scrape, R"(delayd_rpcs_total{code="OK",method="Ack"})");
  EXPECT_EQ(server_acks, static_cast<double>(stats.ack_rpcs)) << scrape;
  EXPECT_TRUE(Eventually([&] { return Drained("load"); }));
}

TEST_F(SubscriberTest, FailedHandlerIsNackedAndRedeliveredAsAttemptTwo) {
  Recorder rec;
  auto sub = MustStart(Opts("fail"), [&](const v1::Delivery& d) {
    rec.Add(d);
    if (d.attempt() == 1) return absl::UnavailableError("database is down");
    return absl::OkStatus();
  });
  MustSchedule(WithRetry(JobAfter("fail", "j", "", absl::ZeroDuration()),
                         absl::Seconds(30), absl::Milliseconds(50)));
  ASSERT_TRUE(Eventually([&] { return sub->stats().acked == 1; }));
  const std::vector<Seen> seen = rec.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].delivery.attempt(), 1u);
  EXPECT_EQ(seen[1].delivery.attempt(), 2u);
  EXPECT_EQ(seen[1].delivery.job().last_error(),
            "UNAVAILABLE: database is down");
  EXPECT_EQ(sub->stats().nacks, 1u);
  EXPECT_EQ(sub->stats().handler_errors, 1u);
  EXPECT_TRUE(Eventually([&] { return Drained("fail"); }));
}

TEST_F(SubscriberTest, RetryAfterDelaysTheRedelivery) {
  Recorder rec;
  auto sub = MustStart(Opts("later"), [&](const v1::Delivery& d) {
    rec.Add(d);
    if (d.attempt() == 1) {
      return client::RetryAfter(absl::UnavailableError("busy"),
                                absl::Milliseconds(700));
    }
    return absl::OkStatus();
  });
  MustSchedule(WithRetry(JobAfter("later", "j", "", absl::ZeroDuration()),
                         absl::Seconds(30), absl::Milliseconds(1)));
  ASSERT_TRUE(Eventually([&] { return sub->stats().acked == 1; }));
  const std::vector<Seen> seen = rec.seen();
  ASSERT_EQ(seen.size(), 2u);
  // The job's own backoff (1 ms) would have come back at once.
  EXPECT_GE(seen[1].at - seen[0].at, absl::Milliseconds(700));
}

TEST_F(SubscriberTest, DeadLetterMovesTheJobToTheDeadLetters) {
  Recorder rec;
  auto sub = MustStart(Opts("dl"), [&](const v1::Delivery& d) {
    rec.Add(d);
    return client::DeadLetter(absl::InvalidArgumentError("unparsable"));
  });
  MustSchedule(JobAfter("dl", "j", "", absl::ZeroDuration()));
  ASSERT_TRUE(Eventually([&] { return sub->stats().nacks == 1; }));
  auto job = client_->GetJob("dl", "j");
  ASSERT_OK(job);
  EXPECT_EQ(job->state(), v1::JOB_STATE_DEAD);
  EXPECT_EQ(job->last_error(), "INVALID_ARGUMENT: unparsable");
  EXPECT_EQ(rec.count(), 1u);
}

TEST_F(SubscriberTest, AThrowingHandlerCountsAsFailed) {
  auto sub = MustStart(Opts("throw"), [](const v1::Delivery&) -> absl::Status {
    throw std::runtime_error("oops");
  });
  MustSchedule(WithRetry(JobAfter("throw", "j", "", absl::ZeroDuration()),
                         absl::Seconds(30), absl::Hours(1)));
  ASSERT_TRUE(Eventually([&] { return sub->stats().nacks == 1; }));
  auto job = client_->GetJob("throw", "j");
  ASSERT_OK(job);
  EXPECT_EQ(job->last_error(), "INTERNAL: handler threw: oops");
}

// A handler running 3.5 s on a job whose lease is 1 s.
class LongHandlerTest : public SubscriberTest,
                        public ::testing::WithParamInterface<bool> {};

TEST_P(LongHandlerTest, LeaseIsExtendedWhileTheHandlerRuns) {
  const bool extend = GetParam();
  Recorder rec;
  SubscriberOptions o = Opts("long");
  o.extend_leases = extend;
  auto sub = MustStart(o, [&](const v1::Delivery& d) {
    rec.Add(d);
    if (d.attempt() == 1) absl::SleepFor(absl::Milliseconds(3500));
    return absl::OkStatus();
  });
  MustSchedule(WithRetry(JobAfter("long", "j", "", absl::ZeroDuration()),
                         absl::Seconds(1), absl::Milliseconds(1)));
  ASSERT_TRUE(Eventually([&] { return sub->stats().handled_ok >= 1; }));
  ASSERT_TRUE(Eventually([&] { return Drained("long"); }));
  const std::vector<Seen> seen = rec.seen();
  if (extend) {
    ASSERT_EQ(seen.size(), 1u) << "redelivered while the handler ran";
    EXPECT_GE(sub->stats().lease_extensions, 3u);
    EXPECT_EQ(sub->stats().lease_extension_failures, 0u);
    // The server applies the ack before it answers; the client counts it
    // once the answer is back, which may come after Drained saw the job go.
    EXPECT_TRUE(Eventually([&] { return sub->stats().acked == 1u; }))
        << sub->stats().acked;
  } else {
    // The control: without extensions the lease runs out and the job comes
    // again (to a free handler thread) while the first handler still runs.
    ASSERT_GE(seen.size(), 2u);
    EXPECT_EQ(seen[1].delivery.attempt(), 2u);
    EXPECT_LT(seen[1].at, seen[0].at + absl::Milliseconds(3500));
    EXPECT_EQ(sub->stats().lease_extensions, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Extend, LongHandlerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("On")
                                             : std::string("Off");
                         });

class SubscriberRestartTest : public SubscriberTest,
                              public ::testing::WithParamInterface<int> {};

TEST_P(SubscriberRestartTest, KeepsReceivingAfterAServerRestart) {
  Recorder rec;
  absl::Notification release;
  auto sub = MustStart(Opts("rs"), [&](const v1::Delivery& d) {
    rec.Add(d);
    // "held" is in flight (its handler blocked) when the server goes down.
    if (d.job().id() == "held" && d.attempt() == 1)
      release.WaitForNotification();
    return absl::OkStatus();
  });
  MustSchedule(JobAfter("rs", "held", "", absl::ZeroDuration()));
  for (int i = 0; i < 20; ++i) {
    MustSchedule(
        JobAfter("rs", absl::StrCat("a", i), "", absl::ZeroDuration()));
  }
  ASSERT_TRUE(Eventually([&] { return sub->stats().acked == 20; }));

  ASSERT_NO_FATAL_FAILURE(StopServer(GetParam()));
  release.Notify();  // its ack is now stale: "held" must come again
  ASSERT_NO_FATAL_FAILURE(StartServerAgain());
  for (int i = 0; i < 20; ++i) {
    MustSchedule(
        JobAfter("rs", absl::StrCat("b", i), "", absl::ZeroDuration()));
  }
  ASSERT_TRUE(Eventually([&] { return rec.ids().size() == 41; }))
      << rec.ids().size();
  EXPECT_TRUE(Eventually([&] { return Drained("rs"); }));
  EXPECT_GE(sub->stats().streams_opened, 2u);
  EXPECT_OK(sub->status());
  int held = 0;
  for (const Seen& s : rec.seen()) {
    if (s.delivery.job().id() != "held") continue;
    ++held;
    EXPECT_EQ(s.delivery.attempt(), static_cast<uint32_t>(held));
  }
  EXPECT_EQ(held, 2);
}

INSTANTIATE_TEST_SUITE_P(Signals, SubscriberRestartTest,
                         ::testing::Values(SIGTERM, SIGKILL),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM
                                      ? std::string("Sigterm")
                                      : std::string("Sigkill");
                         });

TEST_F(SubscriberTest, StopFinishesRunningHandlersAndFlushesTheirAcks) {
  absl::Mutex mu;
  int started = 0;
  int finished = 0;
  SubscriberOptions o = Opts("stop");
  o.handler_threads = 4;
  o.ack_flush_interval = absl::Seconds(10);  // only Stop flushes them
  auto sub = MustStart(o, [&](const v1::Delivery&) {
    {
      absl::MutexLock lock(&mu);
      ++started;
    }
    absl::SleepFor(absl::Milliseconds(300));
    absl::MutexLock lock(&mu);
    ++finished;
    return absl::OkStatus();
  });
  for (int i = 0; i < 20; ++i) {
    MustSchedule(
        JobAfter("stop", absl::StrCat("j", i), "", absl::ZeroDuration()));
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return started >= 4;
  }));
  sub->Stop();
  const client::SubscriberStats stats = sub->stats();
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(started, finished);
    EXPECT_EQ(stats.acked, static_cast<uint64_t>(finished));
  }
  EXPECT_EQ(stats.ack_failures, 0u);
  EXPECT_EQ(stats.handled_ok + stats.dropped, stats.deliveries);
  EXPECT_GT(stats.dropped, 0u);
  // What was not handled goes to the next subscriber at once.
  Recorder rec;
  auto next = MustStart(Opts("stop"), [&](const v1::Delivery& d) {
    rec.Add(d);
    return absl::OkStatus();
  });
  EXPECT_TRUE(Eventually([&] { return Drained("stop"); }));
  EXPECT_EQ(rec.count() + stats.handled_ok, 20u);
}

TEST_F(SubscriberTest, BadOptionsAreRefusedNamingTheField) {
  auto ok = [](const v1::Delivery&) { return absl::OkStatus(); };
  auto no_topic = Subscriber::Start(client_.get(), SubscriberOptions{}, ok);
  EXPECT_EQ(no_topic.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_topic.status().message().find("topic"), absl::string_view::npos);
  SubscriberOptions o = Opts("t");
  o.max_in_flight = 0;
  auto bad_credit = Subscriber::Start(client_.get(), o, ok);
  EXPECT_NE(bad_credit.status().message().find("max_in_flight"),
            absl::string_view::npos)
      << bad_credit.status();
  o = Opts("t");
  o.ack_batch_size = 1001;
  EXPECT_NE(Subscriber::Start(client_.get(), o, ok)
                .status()
                .message()
                .find("ack_batch_size"),
            absl::string_view::npos);
}

TEST_F(SubscriberTest, AServerRefusalStopsReconnecting) {
  std::vector<absl::Status> errors;
  absl::Mutex mu;
  SubscriberOptions o = Opts("bad topic!");
  o.on_error = [&](const absl::Status& s) {
    absl::MutexLock lock(&mu);
    errors.push_back(s);
  };
  auto sub = MustStart(o, [](const v1::Delivery&) { return absl::OkStatus(); });
  ASSERT_TRUE(Eventually([&] { return !sub->status().ok(); }));
  EXPECT_EQ(sub->status().code(), absl::StatusCode::kInvalidArgument);
  absl::SleepFor(absl::Milliseconds(500));  // several backoffs' worth
  EXPECT_EQ(sub->stats().streams_opened, 1u);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace delayd::testing
