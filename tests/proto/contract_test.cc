// The API contract: every rpc, message, enum, field and enum value named in
// shared/DESIGN.md ("API" and "Messages") exists in delayd.v1 under exactly
// that name.
#include <string>
#include <utility>
#include <vector>

#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace delayd::testing {
namespace {

using ::google::protobuf::DescriptorPool;

const DescriptorPool& Pool() {
  // Make sure the file is linked in and registered.
  (void)delayd::v1::Job::descriptor();
  return *DescriptorPool::generated_pool();
}

TEST(ContractTest, EveryRpcExists) {
  const auto* service = Pool().FindServiceByName("delayd.v1.DelayQueue");
  ASSERT_NE(service, nullptr);
  for (const char* rpc :
       {"Schedule", "ScheduleBatch", "Reschedule", "Cancel", "CancelByPrefix",
        "GetJob", "ListJobs", "Subscribe", "Ack", "Nack", "ExtendLease",
        "Redrive", "GetStats", "PreviewSchedule"}) {
    EXPECT_NE(service->FindMethodByName(rpc), nullptr) << rpc;
  }
  EXPECT_TRUE(service->FindMethodByName("Subscribe")->server_streaming());
  EXPECT_EQ(service->FindMethodByName("GetJob")->output_type()->full_name(),
            "delayd.v1.Job");
}

TEST(ContractTest, EveryMessageHasItsFields) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> messages =
      {
          {"JobKey", {"topic", "id"}},
          {"RetryPolicy",
           {"max_attempts", "lease", "initial_backoff", "max_backoff",
            "backoff_multiplier"}},
          {"JobSpec",
           {"topic", "id", "payload", "delay", "fire_at", "retry", "labels"}},
          {"Job",
           {"topic", "id", "payload", "state", "fire_at", "attempts", "retry",
            "labels", "created_at", "updated_at", "last_error"}},
          {"ScheduleRequest", {"job", "if_exists"}},
          {"ScheduleResponse", {"job", "created"}},
          {"ScheduleBatchRequest", {"requests"}},
          {"ScheduleBatchResponse", {"results"}},
          {"ScheduleResult", {"code", "message", "job", "created"}},
          {"RescheduleRequest", {"key", "delay", "fire_at"}},
          {"RescheduleResponse", {"job"}},
          {"CancelRequest", {"key"}},
          {"CancelResponse", {"outcome", "job"}},
          {"CancelByPrefixRequest", {"topic", "id_prefix"}},
          {"CancelByPrefixResponse", {"canceled"}},
          {"GetJobRequest", {"key"}},
          {"ListJobsRequest",
           {"topic", "id_prefix", "states", "due_after", "due_before",
            "page_size", "page_token", "include_payload"}},
          {"ListJobsResponse", {"jobs", "next_page_token"}},
          {"SubscribeRequest", {"topic", "consumer", "max_in_flight"}},
          {"Delivery", {"job", "ack_token", "attempt", "lease_expires_at"}},
          {"AckRequest", {"ack_tokens"}},
          {"AckResponse", {"results"}},
          {"AckResult", {"ack_token", "code", "message"}},
          {"NackRequest",
           {"ack_token", "retry_after", "reason", "dead_letter"}},
          {"NackResponse", {"job"}},
          {"ExtendLeaseRequest", {"ack_token", "extend_by"}},
          {"ExtendLeaseResponse", {"lease_expires_at"}},
          {"RedriveRequest", {"topic", "id_prefix"}},
          {"RedriveResponse", {"redriven"}},
          {"GetStatsRequest", {"topic"}},
          {"GetStatsResponse", {"topics"}},
          {"TopicStats",
           {"topic", "scheduled", "ready", "in_flight", "dead", "subscribers",
            "due_next_minute", "due_next_hour", "due_next_day", "done",
            "canceled"}},
      };
  for (const auto& [name, fields] : messages) {
    const auto* message = Pool().FindMessageTypeByName("delayd.v1." + name);
    ASSERT_NE(message, nullptr) << name;
    for (const std::string& field : fields) {
      EXPECT_NE(message->FindFieldByName(field), nullptr)
          << name << "." << field;
    }
  }
  // The two oneofs of the contract.
  for (const char* name :
       {"delayd.v1.JobSpec", "delayd.v1.RescheduleRequest"}) {
    const auto* when =
        Pool().FindMessageTypeByName(name)->FindOneofByName("when");
    ASSERT_NE(when, nullptr) << name;
    EXPECT_EQ(when->field_count(), 2) << name;
  }
}

TEST(ContractTest, EveryEnumHasItsPrefixedValues) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> enums = {
      {"JobState",
       {"JOB_STATE_UNSPECIFIED", "JOB_STATE_SCHEDULED", "JOB_STATE_READY",
        "JOB_STATE_IN_FLIGHT", "JOB_STATE_DEAD", "JOB_STATE_DONE",
        "JOB_STATE_CANCELED", "JOB_STATE_PAUSED"}},
      {"IfExists",
       {"IF_EXISTS_UNSPECIFIED", "IF_EXISTS_FAIL", "IF_EXISTS_KEEP",
        "IF_EXISTS_REPLACE"}},
      {"CancelOutcome",
       {"CANCEL_OUTCOME_UNSPECIFIED", "CANCEL_OUTCOME_CANCELED",
        "CANCEL_OUTCOME_CANCELED_IN_FLIGHT", "CANCEL_OUTCOME_ALREADY_DONE",
        "CANCEL_OUTCOME_NOT_FOUND"}},
  };
  for (const auto& [name, values] : enums) {
    const auto* type = Pool().FindEnumTypeByName("delayd.v1." + name);
    ASSERT_NE(type, nullptr) << name;
    EXPECT_EQ(type->value_count(), static_cast<int>(values.size())) << name;
    for (const std::string& value : values) {
      EXPECT_NE(type->FindValueByName(value), nullptr) << value;
    }
    EXPECT_EQ(type->FindValueByNumber(0)->name(), values.front()) << name;
  }
}

}  // namespace
}  // namespace delayd::testing
