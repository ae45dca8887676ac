// SchedulePipe (client/schedule_pipe.h) as Client's callers see it, against
// an in-process server: what a caller gets when the stream's answers never
// come.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/client.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/support/poll.h"

namespace delayd::testing {
namespace {

using client::Client;
using client::JobAfter;

// A DelayQueue whose ScheduleStream reads every request and answers none,
// until the client cancels the stream; its other methods are unimplemented.
class UnansweringServer {
 public:
  UnansweringServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~UnansweringServer() {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int read() const { return service_.read.load(); }

 private:
  struct Service : v1::DelayQueue::Service {
    grpc::Status ScheduleStream(
        grpc::ServerContext*,
        grpc::ServerReaderWriter<v1::ScheduleStreamResponse,
                                 v1::ScheduleStreamRequest>* stream) override {
      v1::ScheduleStreamRequest message;
      while (stream->Read(&message)) read += message.requests_size();
      return grpc::Status::OK;
    }
    std::atomic<int> read{0};
  };

  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(ClientStreamTest, CallsWaitingForAnswersThatNeverComeEndAtTheirDeadlines) {
  UnansweringServer server;
  client::ClientOptions options;
  options.target = server.address();
  options.default_deadline = absl::Milliseconds(300);
  Client client(options);
  // Connects the channel (a stream opens only on a READY one).
  EXPECT_EQ(client.GetStats().status().code(),
            absl::StatusCode::kUnimplemented);
  // Twice: the pipe still sends after every caller of the first round left
  // on its deadline.
  int sent = 0;
  for (int round = 0; round < 2; ++round) {
    constexpr int kCallers = 16;
    std::vector<absl::Status> got(kCallers);
    std::vector<absl::Duration> took(kCallers);
    std::vector<std::thread> callers;
    for (int i = 0; i < kCallers; ++i) {
      callers.emplace_back([&, i] {
        const absl::Time start = absl::Now();
        got[i] = client
                     .Schedule(JobAfter("t", absl::StrCat(round, "-", i), "",
                                        absl::Hours(1)))
                     .status();
        took[i] = absl::Now() - start;
      });
    }
    for (std::thread& t : callers) t.join();
    for (int i = 0; i < kCallers; ++i) {
      EXPECT_EQ(got[i].code(), absl::StatusCode::kDeadlineExceeded)
          << "round " << round << " caller " << i << ": " << got[i];
      EXPECT_GE(took[i], absl::Milliseconds(300));
      EXPECT_LT(took[i], absl::Seconds(5));
      // Normally all are sent; on a loaded machine a request may still be
      // queued at its deadline, and then it is never sent.
      if (!absl::StrContains(got[i].message(), "before the request was sent")) {
        ++sent;
      }
    }
    // The server got exactly the requests said to be sent.
    EXPECT_TRUE(
        PollUntil([&] { return server.read() == sent; }, absl::Seconds(10)))
        << server.read() << " requests read, " << sent << " sent";
  }
  EXPECT_GT(sent, 0);
}

}  // namespace
}  // namespace delayd::testing
