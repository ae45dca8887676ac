// order_and_heartbeat: the two classic uses of delayd, against a running
// server, with the client library.
//
//  1. Order timeout. Creating an order schedules "close order <id>" 2 s
//     later; paying it cancels that job (Cancel says whether the timeout
//     was stopped in time); an order left unpaid is closed by the handler
//     when the job fires.
//  2. Heartbeat timeout. Every heartbeat of a device schedules "mark
//     offline" 1 s ahead with IF_EXISTS_REPLACE, pushing the same job back;
//     it fires only once the heartbeats stop.
//
// Usage: order_and_heartbeat [--server=127.0.0.1:7400]
// Exits 0 when both played out as expected, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "delayd/client.h"

namespace {

using delayd::client::Client;
using delayd::client::ClientOptions;
using delayd::client::JobAfter;
using delayd::client::Subscriber;
using delayd::client::SubscriberOptions;
namespace v1 = delayd::v1;

constexpr char kOrdersTopic[] = "example.orders.close";
constexpr char kOfflineTopic[] = "example.devices.offline";
constexpr absl::Duration kOrderTimeout = absl::Seconds(2);
constexpr absl::Duration kHeartbeatTimeout = absl::Seconds(1);
constexpr absl::Duration kHeartbeatEvery = absl::Milliseconds(300);

// What the handlers saw; they run on the subscribers' threads.
struct Seen {
  absl::Mutex mu;
  std::set<std::string> closed_orders ABSL_GUARDED_BY(mu);
  int offline_fired ABSL_GUARDED_BY(mu) = 0;
  absl::Time offline_at ABSL_GUARDED_BY(mu);
};

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "order_and_heartbeat: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ClientOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--server=", 9) == 0) {
      options.target = argv[i] + 9;
    } else {
      std::fprintf(stderr, "usage: %s [--server=host:port]\n", argv[0]);
      return 2;
    }
  }
  Client client(options);
  if (absl::Status s = client.CheckHealth(); !s.ok()) {
    return Fail(absl::StrCat("server ", options.target), s);
  }
  // Ids unique to this run, so that runs do not meet each other's jobs.
  const std::string run = absl::StrCat(absl::ToUnixMillis(absl::Now()));
  Seen seen;

  // The handlers: what a service does when a timeout fires.
  SubscriberOptions orders;
  orders.topic = kOrdersTopic;
  auto orders_sub =
      Subscriber::Start(&client, orders, [&seen](const v1::Delivery& d) {
        std::printf("close order %s: unpaid after the timeout (attempt %u)\n",
                    d.job().payload().c_str(), d.attempt());
        absl::MutexLock lock(&seen.mu);
        seen.closed_orders.insert(d.job().payload());
        return absl::OkStatus();
      });
  if (!orders_sub.ok()) return Fail("subscribe", orders_sub.status());
  SubscriberOptions offline;
  offline.topic = kOfflineTopic;
  auto offline_sub =
      Subscriber::Start(&client, offline, [&seen](const v1::Delivery& d) {
        std::printf("device %s is offline: no heartbeat for %s\n",
                    d.job().payload().c_str(),
                    absl::FormatDuration(kHeartbeatTimeout).c_str());
        absl::MutexLock lock(&seen.mu);
        ++seen.offline_fired;
        seen.offline_at = absl::Now();
        return absl::OkStatus();
      });
  if (!offline_sub.ok()) return Fail("subscribe", offline_sub.status());

  // 1. Three orders are created; each schedules its own timeout.
  for (const char* order : {"A", "B", "C"}) {
    const std::string id = absl::StrCat("order-", run, "-", order);
    auto created = client.Schedule(JobAfter(
        kOrdersTopic, id, absl::StrCat("order-", order), kOrderTimeout));
    if (!created.ok()) return Fail("schedule " + id, created.status());
    std::printf("order %s created; closes in %s unless paid\n", order,
                absl::FormatDuration(kOrderTimeout).c_str());
  }
  // Order B is paid: cancel its timeout. The outcome says what happened.
  auto paid = client.Cancel(kOrdersTopic, absl::StrCat("order-", run, "-B"));
  if (!paid.ok()) return Fail("cancel order B", paid.status());
  std::printf("order B paid: timeout %s\n",
              v1::CancelOutcome_Name(paid->outcome()).c_str());
  if (paid->outcome() != v1::CANCEL_OUTCOME_CANCELED) {
    std::printf("order B: the timeout had already fired — refund it\n");
  }

  // 2. A device beats for a while; each beat pushes "offline" back.
  const std::string device = absl::StrCat("sensor-", run);
  absl::Time last_beat;
  for (int beat = 0; beat < 6; ++beat) {
    auto replaced = client.Schedule(
        JobAfter(kOfflineTopic, device, "sensor-7", kHeartbeatTimeout),
        v1::IF_EXISTS_REPLACE);
    if (!replaced.ok()) return Fail("heartbeat", replaced.status());
    last_beat = absl::Now();
    absl::SleepFor(kHeartbeatEvery);
  }
  std::printf("device sensor-7 stops beating\n");

  // Wait for both timeouts to play out.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  bool done = false;
  while (!done && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    absl::MutexLock lock(&seen.mu);
    done = seen.closed_orders.size() >= 2 && seen.offline_fired >= 1;
  }
  (*orders_sub)->Stop();
  (*offline_sub)->Stop();

  absl::MutexLock lock(&seen.mu);
  const std::set<std::string> expected = {"order-A", "order-C"};
  if (seen.closed_orders != expected) {
    std::fprintf(stderr,
                 "order_and_heartbeat: closed %zu orders, expected A and C\n",
                 seen.closed_orders.size());
    return 1;
  }
  if (seen.offline_fired != 1 || seen.offline_at < last_beat) {
    std::fprintf(stderr,
                 "order_and_heartbeat: offline fired %d times, expected once "
                 "after the last heartbeat\n",
                 seen.offline_fired);
    return 1;
  }
  std::printf(
      "done: orders A and C closed, B paid in time; sensor-7 "
      "offline after its last heartbeat\n");
  return 0;
}
