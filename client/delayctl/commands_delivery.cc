// The delivery commands of delayctl: subscribe, ack, nack, extend-lease,
// redrive.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/delayctl/format.h"
#include "client/delayctl/job_text.h"
#include "client/delayctl/session.h"
#include "delayd/proto_time.h"

namespace delayd::delayctl {
namespace {

using Stub = v1::DelayQueue::Stub;

std::string DefaultConsumer() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat("delayctl@", host, ":", getpid());
}

// Acks one token; an empty string on success, else why not.
std::string AckOne(Session& s, const std::string& token) {
  v1::AckRequest request;
  request.add_ack_tokens(token);
  v1::AckResponse response;
  grpc::Status status = s.Call(s.stub(), &Stub::Ack, request, &response);
  if (!status.ok()) return s.RpcFailed(status).message;
  if (response.results_size() != 1) return "ack: malformed reply";
  if (response.results(0).code() != 0) return response.results(0).message();
  return "";
}

Exit Subscribe(Session& s, const Args& a) {
  v1::SubscribeRequest request;
  request.set_topic(a.positional()[0]);
  request.set_consumer(a.Get("consumer", DefaultConsumer()));
  uint32_t max_in_flight = 0;
  uint64_t count = 0;
  if (a.Has("max-in-flight") &&
      !absl::SimpleAtoi(a.Get("max-in-flight", ""), &max_in_flight)) {
    return Exit::Usage("--max-in-flight: not a non-negative integer");
  }
  if (a.Has("count") && !absl::SimpleAtoi(a.Get("count", ""), &count)) {
    return Exit::Usage("--count: not a non-negative integer");
  }
  request.set_max_in_flight(max_in_flight);
  const bool ack = a.Has("ack");

  if (Exit connected = s.Connect(); connected.code != kExitOk) {
    return connected;
  }
  std::unique_ptr<grpc::ClientContext> context = s.NewContext();
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader =
      s.stub().Subscribe(context.get(), request);
  // Ends the stream on SIGINT: Read blocks, so a watcher cancels the call.
  std::atomic<bool> done{false};
  std::atomic<bool> stopped{false};
  Session* session = &s;
  grpc::ClientContext* ctx = context.get();
  std::atomic<bool>* done_ptr = &done;
  std::atomic<bool>* stopped_ptr = &stopped;
  std::thread watcher([session, ctx, done_ptr, stopped_ptr] {
    while (!done_ptr->load()) {
      if (session->stop_requested()) {
        stopped_ptr->store(true);
        ctx->TryCancel();
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  Exit result = Exit::Ok();
  uint64_t received = 0;
  bool ended_by_count = false;
  // Prints (and acks) one delivery; false once --count is reached.
  auto show = [&](const v1::Delivery& delivery) {
    const absl::Time now = absl::Now();
    std::string ack_error;
    if (ack) ack_error = AckOne(s, delivery.ack_token());
    if (s.json()) {
      s.PrintJson(delivery);
    } else {
      const v1::Job& job = delivery.job();
      const absl::Duration late = now - FromProto(job.fire_at());
      s.out() << AbsoluteTime(now, /*millis=*/true) << "  "
              << KeyText(job.topic(), job.id()) << "  attempt "
              << delivery.attempt() << "/" << job.retry().max_attempts()
              << "  late "
              << HumanDuration(std::max(late, absl::ZeroDuration())) << "  "
              << PayloadPreview(job.payload(), 60) << "  "
              << (ack ? (ack_error.empty() ? "acked" : "ACK FAILED")
                      : absl::StrCat("token ", delivery.ack_token()))
              << "\n";
      s.out().flush();
    }
    if (!ack_error.empty()) {
      result = Exit::Failed(absl::StrCat(
          "ack of ", KeyText(delivery.job().topic(), delivery.job().id()),
          " failed: ", ack_error));
    }
    return count == 0 || ++received < count;
  };
  // A stream message carries one or more deliveries.
  v1::SubscribeResponse message;
  while (!ended_by_count && reader->Read(&message)) {
    for (const v1::Delivery& delivery : message.deliveries()) {
      if (!show(delivery)) {
        ended_by_count = true;
        context->TryCancel();
        break;
      }
    }
  }
  done.store(true);
  watcher.join();
  const grpc::Status status = reader->Finish();
  if (ended_by_count || stopped.load()) return result;
  if (!status.ok()) return s.RpcFailed(status);
  return result;
}

Exit Ack(Session& s, const Args& a) {
  v1::AckRequest request;
  for (const std::string& token : a.positional()) request.add_ack_tokens(token);
  return s.CallAndShow(
      s.stub(), &Stub::Ack, request,
      [&s](const v1::AckResponse& response) {
        std::vector<std::vector<std::string>> rows;
        for (const v1::AckResult& r : response.results()) {
          rows.push_back(
              {r.code() == 0 ? "acked" : "FAILED", r.ack_token(), r.message()});
        }
        s.out() << Table(rows);
      },
      [](const v1::AckResponse& response) {
        const auto failed =
            std::count_if(response.results().begin(), response.results().end(),
                          [](const v1::AckResult& r) { return r.code() != 0; });
        if (failed > 0) {
          return Exit::Failed(absl::StrCat(
              failed, " of ", response.results_size(), " acks failed"));
        }
        return Exit::Ok();
      });
}

Exit Nack(Session& s, const Args& a) {
  v1::NackRequest request;
  request.set_ack_token(a.positional()[0]);
  request.set_reason(a.Get("reason", ""));
  request.set_dead_letter(a.Has("dead-letter"));
  if (a.Has("retry-after")) {
    absl::StatusOr<absl::Duration> d =
        ParseDuration(a.Get("retry-after", ""), "--retry-after");
    if (!d.ok()) return Exit::Usage(std::string(d.status().message()));
    *request.mutable_retry_after() = ToProtoSaturated(*d);
  }
  return s.CallAndShow(
      s.stub(), &Stub::Nack, request, [&s](const v1::NackResponse& response) {
        s.out() << "nacked  " << JobLine(response.job(), absl::Now()) << "\n";
      });
}

Exit ExtendLease(Session& s, const Args& a) {
  v1::ExtendLeaseRequest request;
  request.set_ack_token(a.positional()[0]);
  absl::StatusOr<absl::Duration> d =
      ParseDuration(a.positional()[1], "DURATION");
  if (!d.ok()) return Exit::Usage(std::string(d.status().message()));
  *request.mutable_extend_by() = ToProtoSaturated(*d);
  return s.CallAndShow(s.stub(), &Stub::ExtendLease, request,
                       [&s](const v1::ExtendLeaseResponse& response) {
                         s.out() << "lease ends "
                                 << RelativeTime(
                                        FromProto(response.lease_expires_at()),
                                        absl::Now())
                                 << "\n";
                       });
}

Exit Redrive(Session& s, const Args& a) {
  v1::RedriveRequest request;
  request.set_topic(a.positional()[0]);
  if (a.positional().size() > 1) request.set_id_prefix(a.positional()[1]);
  return s.CallAndShow(s.stub(), &Stub::Redrive, request,
                       [&s, &request](const v1::RedriveResponse& response) {
                         s.out()
                             << "redriven " << response.redriven() << " DEAD "
                             << (response.redriven() == 1 ? "job" : "jobs")
                             << " of " << request.topic()
                             << " (now SCHEDULED, due now)\n";
                       });
}

}  // namespace

std::vector<Command> DeliveryCommands() {
  return {
      {{"subscribe",
        "TOPIC",
        "Receive TOPIC's jobs as they fall due and print each delivery.",
        "Runs until Ctrl-C (exit 0) or --count deliveries. Without --ack each\n"
        "line shows the delivery's ack token for `ack`, `nack` or\n"
        "`extend-lease`, which must run while this subscriber is still\n"
        "connected: when it stops, its unacked deliveries are redelivered.\n"
        "With --json prints each Delivery message on its own line.\n",
        {{"ack", "", "ack each delivery once printed"},
         {"count", "N", "stop after N deliveries (default: run until Ctrl-C)"},
         {"max-in-flight", "N",
          "unacked deliveries held at once, 1-10000 (default 100)"},
         {"consumer", "NAME", "consumer name for the server's logs"}},
        1,
        1},
       Subscribe},
      {{"ack",
        "TOKEN...",
        "Finish deliveries by their ack tokens.",
        "Exits 1 when any token is refused (stale or malformed).\n",
        {},
        1,
        1000},
       Ack},
      {{"nack",
        "TOKEN",
        "Give a delivery back, to retry later or to the dead letters.",
        "",
        {{"retry-after", "DURATION",
          "retry no earlier than this (default: the job's backoff)"},
         {"reason", "TEXT", "why; stored as the job's last error"},
         {"dead-letter", "", "move the job to DEAD now instead of retrying"}},
        1,
        1},
       Nack},
      {{"extend-lease",
        "TOKEN DURATION",
        "Push a delivery's lease deadline to DURATION from now.",
        "",
        {},
        2,
        2},
       ExtendLease},
      {{"redrive",
        "TOPIC [PREFIX]",
        "Put DEAD jobs of TOPIC (ids starting with PREFIX) back to SCHEDULED.",
        "",
        {},
        1,
        2},
       Redrive},
  };
}

}  // namespace delayd::delayctl
