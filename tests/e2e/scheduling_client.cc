#include "tests/e2e/scheduling_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/poll.h"

namespace delayd::testing {

using Stub = v1::DelayQueue::Stub;

SchedulingClient::SchedulingClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::DelayQueue::NewStub(std::move(channel))) {}

Reply<v1::ScheduleResponse> SchedulingClient::Schedule(
    const v1::ScheduleRequest& request) {
  return UnaryCall(*stub_, &Stub::Schedule, request);
}

Reply<v1::ScheduleBatchResponse> SchedulingClient::ScheduleBatch(
    const v1::ScheduleBatchRequest& request) {
  return UnaryCall(*stub_, &Stub::ScheduleBatch, request);
}

Reply<v1::RescheduleResponse> SchedulingClient::Reschedule(
    const v1::RescheduleRequest& request) {
  return UnaryCall(*stub_, &Stub::Reschedule, request);
}

Reply<v1::CancelResponse> SchedulingClient::Cancel(const std::string& topic,
                                                   const std::string& id) {
  v1::CancelRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  return UnaryCall(*stub_, &Stub::Cancel, request);
}

Reply<v1::CancelByPrefixResponse> SchedulingClient::CancelByPrefix(
    const std::string& topic, const std::string& prefix) {
  v1::CancelByPrefixRequest request;
  request.set_topic(topic);
  request.set_id_prefix(prefix);
  return UnaryCall(*stub_, &Stub::CancelByPrefix, request);
}

Reply<v1::Job> SchedulingClient::GetJob(const std::string& topic,
                                        const std::string& id) {
  v1::GetJobRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  return UnaryCall(*stub_, &Stub::GetJob, request);
}

Reply<v1::ListJobsResponse> SchedulingClient::ListJobs(
    const v1::ListJobsRequest& request) {
  return UnaryCall(*stub_, &Stub::ListJobs, request);
}

Reply<v1::GetStatsResponse> SchedulingClient::GetStats(
    const std::string& topic) {
  v1::GetStatsRequest request;
  request.set_topic(topic);
  return UnaryCall(*stub_, &Stub::GetStats, request);
}

Reply<v1::PauseJobResponse> SchedulingClient::PauseJob(const std::string& topic,
                                                       const std::string& id) {
  v1::PauseJobRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  return UnaryCall(*stub_, &Stub::PauseJob, request);
}

Reply<v1::ResumeJobResponse> SchedulingClient::ResumeJob(
    const std::string& topic, const std::string& id) {
  v1::ResumeJobRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  return UnaryCall(*stub_, &Stub::ResumeJob, request);
}

std::vector<v1::Job> SchedulingClient::ListAll(v1::ListJobsRequest query) {
  std::vector<v1::Job> jobs;
  query.clear_page_token();
  for (int pages = 0;; ++pages) {
    Reply<v1::ListJobsResponse> page = ListJobs(query);
    if (!page.ok()) {
      ADD_FAILURE() << "ListJobs page " << pages << ": "
                    << page.status.error_code() << " "
                    << page.status.error_message();
      return jobs;
    }
    for (v1::Job& job : *page.response.mutable_jobs()) {
      jobs.push_back(std::move(job));
    }
    if (page.response.next_page_token().empty()) return jobs;
    query.set_page_token(page.response.next_page_token());
  }
}

v1::TopicStats SchedulingClient::StatsOf(const std::string& topic) {
  Reply<v1::GetStatsResponse> stats = GetStats(topic);
  EXPECT_TRUE(stats.ok()) << stats.status.error_message();
  EXPECT_EQ(stats.response.topics_size(), 1);
  if (stats.response.topics_size() != 1) return v1::TopicStats();
  EXPECT_EQ(stats.response.topics(0).topic(), topic);
  return stats.response.topics(0);
}

std::string SchedulingClient::Snapshot() {
  Reply<v1::GetStatsResponse> stats = GetStats("");
  EXPECT_TRUE(stats.ok()) << stats.status.error_message();
  std::string out = stats.response.DebugString();
  for (const v1::TopicStats& topic : stats.response.topics()) {
    v1::ListJobsRequest query;
    query.set_topic(topic.topic());
    query.set_include_payload(true);
    query.set_page_size(1000);
    for (const v1::Job& job : ListAll(query)) {
      absl::StrAppend(&out, "job {\n", job.DebugString(), "}\n");
    }
  }
  return out;
}

v1::JobSpec Spec(const std::string& topic, const std::string& id,
                 absl::Duration delay, const std::string& payload) {
  v1::JobSpec spec;
  spec.set_topic(topic);
  spec.set_id(id);
  spec.set_payload(payload);
  if (delay != absl::InfiniteDuration()) {
    *spec.mutable_delay() = ToProto(delay);
  }
  return spec;
}

v1::JobSpec SpecAt(const std::string& topic, const std::string& id,
                   absl::Time fire_at, const std::string& payload) {
  v1::JobSpec spec;
  spec.set_topic(topic);
  spec.set_id(id);
  spec.set_payload(payload);
  *spec.mutable_fire_at() = ToProto(fire_at);
  return spec;
}

v1::ScheduleRequest Request(v1::JobSpec spec, v1::IfExists if_exists) {
  v1::ScheduleRequest request;
  *request.mutable_job() = std::move(spec);
  request.set_if_exists(if_exists);
  return request;
}

bool Eventually(absl::FunctionRef<bool()> done, absl::Duration timeout) {
  return PollUntil(done, timeout);
}

}  // namespace delayd::testing
