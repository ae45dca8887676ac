// http_bench: the HTTP/JSON API's per-call cost, beside gRPC's, against a
// running delayd. One command per run, one result line on stdout:
//
//   http_bench post   --http=H:P [--threads --seconds --topics]
//       POST /api/v1/jobs in a closed loop per thread (a new connection per
//       call: delayd closes it after each reply), 100-byte payloads, due
//       in 1 h, spread over --topics topics;
//   http_bench grpc   --grpc=H:P [same]    the same Schedule over gRPC
//                                          (one channel per thread);
//   http_bench stats  --http=H:P [--threads --seconds]   GET /api/v1/stats;
//   http_bench refresh --http=H:P --seconds=N   one GET /api/v1/stats a
//       second (the console's live view; every tenth also asks for the
//       due-soon chart), for the caller to time the server's CPU.
// Results: BENCHMARKS.md, "HTTP/JSON API (issue 16)"; bench/http/measure.sh
// runs them side by side.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

ABSL_FLAG(std::string, http, "127.0.0.1:9400", "delayd's HTTP address");
ABSL_FLAG(std::string, grpc, "127.0.0.1:7400", "delayd's gRPC address");
ABSL_FLAG(int, threads, 8, "closed-loop callers");
ABSL_FLAG(int, seconds, 10, "how long to run");
ABSL_FLAG(int, topics, 1000, "topics the scheduled jobs spread over");

namespace {

// One HTTP/1.1 exchange on a new connection; returns the status code, or
// -1 when the connection failed.
int HttpCall(const sockaddr_in& to, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int code = -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0 &&
      write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size())) {
    std::string reply;
    char buffer[65536];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) reply.append(buffer, n);
    // "HTTP/1.1 200 OK"
    if (reply.size() > 12 && !absl::SimpleAtoi(reply.substr(9, 3), &code)) {
      code = -1;
    }
  }
  close(fd);
  return code;
}

sockaddr_in AddressOf(const std::string& host_port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  const size_t colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &a.sin_addr);
  int port = 0;
  (void)absl::SimpleAtoi(host_port.substr(colon + 1), &port);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

std::string Request(const std::string& method, const std::string& path,
                    const std::string& host, const std::string& body) {
  return absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", host,
                      "\r\nContent-Type: application/json\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

// 100 bytes, as they go over gRPC and (base64) in JSON.
const std::string kPayload100(100, 'x');
const std::string kPayload100Base64 = absl::Base64Escape(kPayload100);

struct Result {
  std::vector<double> ms;  // latency of each good call
  int64_t errors = 0;
};

// Runs `call(thread, n)` (true: it succeeded) in a closed loop on
// --threads threads for --seconds; prints the line.
template <typename Call>
void Loop(const char* name, Call call) {
  const int threads = absl::GetFlag(FLAGS_threads);
  const absl::Time end =
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<Result> results(threads);
  std::vector<std::thread> workers;
  const absl::Time start = absl::Now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int64_t n = 0; absl::Now() < end; ++n) {
        const absl::Time before = absl::Now();
        if (call(t, n)) {
          results[t].ms.push_back(
              absl::ToDoubleMilliseconds(absl::Now() - before));
        } else {
          ++results[t].errors;
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> all;
  int64_t errors = 0;
  for (const Result& r : results) {
    all.insert(all.end(), r.ms.begin(), r.ms.end());
    errors += r.errors;
  }
  std::sort(all.begin(), all.end());
  const auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[static_cast<size_t>(p * (all.size() - 1))];
  };
  std::printf(
      "%s: threads %d, %zu calls in %.1f s = %.0f/s, p50 %.3f ms, "
      "p99 %.3f ms, errors %lld\n",
      name, threads, all.size(), seconds, all.size() / seconds, pct(0.5),
      pct(0.99), static_cast<long long>(errors));
}

std::string JobJson(int t, int64_t n) {
  const int topics = absl::GetFlag(FLAGS_topics);
  return absl::StrCat(
      R"({"job":{"topic":"bench.)", (t * 7919 + n) % topics, R"(","id":")", t,
      "-", n, "-", absl::ToUnixMicros(absl::Now()),
      R"(","delay":"3600s","payload":")", kPayload100Base64, R"("}})");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() > 1 ? args[1] : "";
  const std::string http = absl::GetFlag(FLAGS_http);
  const sockaddr_in to = AddressOf(http);
  if (command == "post") {
    Loop("http post /api/v1/jobs", [&](int t, int64_t n) {
      return HttpCall(to, Request("POST", "/api/v1/jobs", http,
                                  JobJson(t, n))) == 200;
    });
  } else if (command == "stats") {
    const std::string request = Request("GET", "/api/v1/stats", http, "");
    Loop("http get /api/v1/stats",
         [&](int, int64_t) { return HttpCall(to, request) == 200; });
  } else if (command == "grpc") {
    std::vector<std::unique_ptr<delayd::v1::DelayQueue::Stub>> stubs;
    for (int t = 0; t < absl::GetFlag(FLAGS_threads); ++t) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", t);  // a channel (connection) each
      std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
          absl::GetFlag(FLAGS_grpc), grpc::InsecureChannelCredentials(), args);
      // Connected before the clock starts: gRPC 1.51 can fail a first
      // connection attempt under load (see delayctl), and a failed channel
      // then fails every call at once for its reconnect backoff.
      if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                     std::chrono::seconds(10))) {
        std::fprintf(stderr, "http_bench: cannot connect to %s\n",
                     absl::GetFlag(FLAGS_grpc).c_str());
        return 1;
      }
      stubs.push_back(delayd::v1::DelayQueue::NewStub(channel));
    }
    std::atomic<bool> reported{false};
    Loop("grpc Schedule", [&](int t, int64_t n) {
      delayd::v1::ScheduleRequest request;
      delayd::v1::JobSpec& job = *request.mutable_job();
      job.set_topic(
          absl::StrCat("bench.", (t * 7919 + n) % absl::GetFlag(FLAGS_topics)));
      job.set_id(absl::StrCat(t, "-", n, "-", absl::ToUnixMicros(absl::Now())));
      job.mutable_delay()->set_seconds(3600);
      job.set_payload(kPayload100);
      delayd::v1::ScheduleResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
      const grpc::Status status =
          stubs[t]->Schedule(&context, request, &response);
      if (!status.ok() && !reported.exchange(true)) {
        std::fprintf(stderr, "grpc Schedule: first error: %d %s\n",
                     status.error_code(), status.error_message().c_str());
      }
      return status.ok();
    });
  } else if (command == "refresh") {
    const std::string request = Request("GET", "/api/v1/stats", http, "");
    const std::string chart =
        Request("GET", "/api/v1/stats?dueSoon=true", http, "");
    int bad = 0;
    const int seconds = absl::GetFlag(FLAGS_seconds);
    const absl::Time start = absl::Now();
    for (int i = 0; i < seconds; ++i) {
      // The console's due-soon chart refreshes every 10 s.
      if (HttpCall(to, i % 10 == 0 ? chart : request) != 200) ++bad;
      absl::SleepFor(start + absl::Seconds(i + 1) - absl::Now());
    }
    std::printf("refresh: %d calls at 1/s, errors %d\n", seconds, bad);
  } else {
    std::fprintf(stderr, "usage: http_bench post|grpc|stats|refresh [flags]\n");
    return 2;
  }
  return 0;
}
