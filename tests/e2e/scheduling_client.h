// SchedulingClient: a blocking client of delayd.v1.DelayQueue's scheduling
// rpcs for end-to-end tests, with builders for requests and a Snapshot of
// everything the server shows (every topic's stats and jobs), so that a test
// can check that a refused call changed nothing.
//
// Every call carries a 30 s deadline. Not thread-safe; one per test thread.
#ifndef DELAYD_TESTS_E2E_SCHEDULING_CLIENT_H_
#define DELAYD_TESTS_E2E_SCHEDULING_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tests/support/rpc_deadline.h"

namespace delayd::testing {

// A reply: the call's status and, when OK, its response.
template <typename Response>
struct Reply {
  grpc::Status status;
  Response response;
  bool ok() const { return status.ok(); }
};

// The deadline of every call of the e2e clients.
inline constexpr absl::Duration kCallDeadline = absl::Seconds(30);

// Calls a unary rpc, e.g. &v1::DelayQueue::Stub::GetJob, with kCallDeadline.
template <typename Stub, typename Request, typename Response>
Reply<Response> UnaryCall(Stub& stub,
                          grpc::Status (Stub::*rpc)(grpc::ClientContext*,
                                                    const Request&, Response*),
                          const Request& request) {
  Reply<Response> reply;
  grpc::ClientContext context;
  SetDeadline(context, kCallDeadline);
  reply.status = (stub.*rpc)(&context, request, &reply.response);
  return reply;
}

class SchedulingClient {
 public:
  explicit SchedulingClient(std::shared_ptr<grpc::Channel> channel);

  Reply<v1::ScheduleResponse> Schedule(const v1::ScheduleRequest& request);
  Reply<v1::ScheduleBatchResponse> ScheduleBatch(
      const v1::ScheduleBatchRequest& request);
  Reply<v1::RescheduleResponse> Reschedule(
      const v1::RescheduleRequest& request);
  Reply<v1::CancelResponse> Cancel(const std::string& topic,
                                   const std::string& id);
  Reply<v1::CancelByPrefixResponse> CancelByPrefix(const std::string& topic,
                                                   const std::string& prefix);
  Reply<v1::Job> GetJob(const std::string& topic, const std::string& id);
  Reply<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  Reply<v1::GetStatsResponse> GetStats(const std::string& topic);
  Reply<v1::PauseJobResponse> PauseJob(const std::string& topic,
                                       const std::string& id);
  Reply<v1::ResumeJobResponse> ResumeJob(const std::string& topic,
                                         const std::string& id);

  // Every page of `query` (its page_token is ignored), in order. Fails the
  // test (and returns what it got) when a page is refused.
  std::vector<v1::Job> ListAll(v1::ListJobsRequest query);
  // The stats of one topic (a test failure if the call fails).
  v1::TopicStats StatsOf(const std::string& topic);

  // Everything the server shows: GetStats of all topics, and every job (with
  // payload) of each. Equal snapshots mean nothing observable changed.
  std::string Snapshot();

 private:
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
};

// A spec due `delay` from now (InfiniteDuration: `when` left unset).
v1::JobSpec Spec(const std::string& topic, const std::string& id,
                 absl::Duration delay = absl::Hours(1),
                 const std::string& payload = "");
// A spec due at `fire_at`.
v1::JobSpec SpecAt(const std::string& topic, const std::string& id,
                   absl::Time fire_at, const std::string& payload = "");
v1::ScheduleRequest Request(v1::JobSpec spec,
                            v1::IfExists if_exists = v1::IF_EXISTS_FAIL);

// Polls `done` every 10 ms until it holds or `timeout` passes; returns its
// last answer.
bool Eventually(absl::FunctionRef<bool()> done,
                absl::Duration timeout = absl::Seconds(10));

}  // namespace delayd::testing

// Fails the test unless the Reply is OK, showing the status.
#define ASSERT_RPC_OK(reply)                                                  \
  ASSERT_TRUE((reply).ok()) << "code " << (reply).status.error_code() << ": " \
                            << (reply).status.error_message()
#define EXPECT_RPC_OK(reply)                                                  \
  EXPECT_TRUE((reply).ok()) << "code " << (reply).status.error_code() << ": " \
                            << (reply).status.error_message()

#endif  // DELAYD_TESTS_E2E_SCHEDULING_CLIENT_H_
