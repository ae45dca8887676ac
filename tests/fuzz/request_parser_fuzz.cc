// Fuzz target: request bytes as the gRPC port receives them, parsed by
// server/rpc/request_parser.h ParseRequest into each request type of
// delayd.v1.DelayQueue, then checked as the server checks a request before
// it reaches the job service: the pure validators of server/jobs/
// validation.h (default Limits), the recurrence a request carries
// (PrepareRecurrence, Recurrence::FromProto), its ack tokens and page
// token, and Authorize for open access and for a principal of an auth file.
//
// The input: one byte, whose low 4 bits pick the request type (kTypes
// below), whose bit 4 hands the bytes over as two slices rather than one,
// and whose bit 5 takes the bytes as a message of ScheduleStream instead
// (split into its requests, each parsed on its own); then the message
// bytes. Properties: a refusal is INVALID_ARGUMENT;
// a message that parses holds valid UTF-8 in every string field,
// serializes to bytes that parse to the same message, and every check
// after it answers a status of the codes it documents, with results in
// their documented range.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/auth/auth_config.h"
#include "server/core/access.h"
#include "server/core/occurrences.h"
#include "server/core/page_token.h"
#include "server/delivery/ack_token.h"
#include "server/jobs/limits.h"
#include "server/jobs/validation.h"
#include "server/recurring/recurrence.h"
#include "server/rpc/request_parser.h"
#include "storage/job_record.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/proto_util.h"

namespace {

namespace server = delayd::server;
namespace v1 = delayd::v1;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const server::Limits kLimits;
// 2026-01-01T00:00:00Z: "now" of every check that takes one.
constexpr int64_t kNowMs = 1'767'225'600'000;
// PreviewSchedule's occurrences computed per input, of up to 1000.
constexpr uint32_t kMaxPreview = 10;

// A caller that holds a principal: grants on some topics, none on others.
const server::Caller& Principal() {
  static const server::Caller* const caller = [] {
    absl::StatusOr<server::auth::AuthConfig> config =
        server::auth::AuthConfig::Parse(
            "principal fuzz\n"
            "  identity fuzz.svc.internal\n"
            "  grant schedule,cancel,read orders.*\n"
            "  grant consume *.jobs\n"
            "  grant admin ops\n");
    FUZZ_CHECK(config.ok());
    auto shared =
        std::make_shared<const server::auth::AuthConfig>(*std::move(config));
    return new server::Caller(shared, &shared->principals()[0]);
  }();
  return *caller;
}

void CheckInvalid(const absl::Status& s) {
  FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
  if (!s.ok()) FUZZ_CHECK(!s.message().empty());
}

grpc::ByteBuffer ToBuffer(std::string_view bytes, bool split) {
  if (!split || bytes.size() < 2) {
    grpc::Slice slice{std::string(bytes)};
    return grpc::ByteBuffer(&slice, 1);
  }
  const size_t half = bytes.size() / 2;
  grpc::Slice slices[2] = {grpc::Slice{std::string(bytes.substr(0, half))},
                           grpc::Slice{std::string(bytes.substr(half))}};
  return grpc::ByteBuffer(slices, 2);
}

// Every string field of `m`, at any depth, is valid UTF-8 as
// server/jobs/validation.h defines it.
void CheckUtf8(const Message& m) {
  const Reflection& r = *m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r.ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r.FieldSize(m, f); ++i) {
          FUZZ_CHECK(server::IsValidUtf8(r.GetRepeatedString(m, f, i)));
        }
      } else {
        FUZZ_CHECK(server::IsValidUtf8(r.GetString(m, f)));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r.FieldSize(m, f); ++i) {
          CheckUtf8(r.GetRepeatedMessage(m, f, i));
        }
      } else {
        CheckUtf8(r.GetMessage(m, f));
      }
    }
  }
}

// A recurrence read at kNowMs: a status, and occurrences that move on.
void CheckRecurrence(const std::string& field, const v1::Recurrence& r,
                     int64_t now_ms, uint32_t count) {
  absl::StatusOr<server::recurring::Recurrence> recurrence =
      server::recurring::Recurrence::FromProto(field, r, now_ms);
  CheckInvalid(recurrence.status());
  if (!recurrence.ok()) return;
  int64_t after = now_ms;
  for (uint32_t i = 0; i < count; ++i) {
    const std::optional<int64_t> next = recurrence->NextAfter(after);
    if (!next.has_value()) break;
    FUZZ_CHECK(*next > after);
    const v1::Occurrence shown =
        server::recurring::PresentOccurrence(*next, recurrence->zone());
    FUZZ_CHECK(shown.at().seconds() * 1000 + shown.at().nanos() / 1'000'000 ==
               *next);
    after = *next;
  }
}

void CheckKey(const std::string& field, const v1::JobKey& key) {
  CheckInvalid(server::ValidateKey(field, key, kLimits));
}

// The ack token checks of ack_handler.cc's Decode.
void CheckAckToken(const std::string& field, const std::string& text) {
  absl::StatusOr<server::AckToken> token = server::DecodeAckToken(
      field, text,
      server::MaxAckTokenChars(kLimits.max_topic_bytes, kLimits.max_id_bytes));
  CheckInvalid(token.status());
  if (!token.ok()) return;
  CheckInvalid(server::ValidateTopic("", token->topic, kLimits));
  CheckInvalid(server::ValidateId("", token->id, kLimits));
}

// ---- What the job service checks first, per request type. ----

void Validate(const std::string& field, const v1::ScheduleRequest& req) {
  const std::string job_field = absl::StrCat(field, "job");
  const absl::Status spec = server::ValidateSpec(job_field, req.job(), kLimits);
  CheckInvalid(spec);
  if (!spec.ok()) return;
  const v1::RetryPolicy retry = server::EffectiveRetry(req.job().retry());
  FUZZ_CHECK(retry.max_attempts() >= 1 && retry.has_lease() &&
             retry.backoff_multiplier() >= 1);
  if (req.job().has_recurrence()) {
    absl::StatusOr<server::PreparedRecurrence> prepared =
        server::PrepareRecurrence(absl::StrCat(job_field, "."), req.job(),
                                  kLimits, kNowMs);
    CheckInvalid(prepared.status());
    if (prepared.ok()) FUZZ_CHECK(prepared->first_ms >= kNowMs);
    return;
  }
  absl::StatusOr<int64_t> due =
      server::ResolveDueMs(job_field, req.job(), kNowMs, kLimits);
  CheckInvalid(due.status());
  if (due.ok()) {
    FUZZ_CHECK(*due >= 0);
    FUZZ_CHECK(*due <=
               kNowMs + absl::ToInt64Milliseconds(kLimits.max_schedule_ahead));
  }
}

void Validate(const std::string&, const v1::ScheduleBatchRequest& req) {
  for (int i = 0;
       i < req.requests_size() && static_cast<size_t>(i) < kLimits.max_batch;
       ++i) {
    Validate(absl::StrCat("requests[", i, "]."), req.requests(i));
  }
}

void Validate(const std::string&, const v1::RescheduleRequest& req) {
  CheckKey("key", req.key());
  absl::StatusOr<int64_t> due = server::ResolveDueMs("", req, kNowMs, kLimits);
  CheckInvalid(due.status());
  if (due.ok()) FUZZ_CHECK(*due >= 0);
  if (req.has_recurrence()) {
    v1::JobSpec spec;  // as JobWriter::RescheduleRecurring checks it
    spec.set_id(req.key().id());
    *spec.mutable_recurrence() = req.recurrence();
    CheckInvalid(server::PrepareRecurrence("", spec, kLimits, kNowMs).status());
  }
}

void Validate(const std::string&, const v1::CancelRequest& req) {
  CheckKey("key", req.key());
}

void Validate(const std::string&, const v1::CancelByPrefixRequest& req) {
  CheckInvalid(server::ValidateTopic("topic", req.topic(), kLimits));
  CheckInvalid(server::ValidateIdPrefix("id_prefix", req.id_prefix(), kLimits));
}

void Validate(const std::string&, const v1::GetJobRequest& req) {
  CheckKey("key", req.key());
}

void Validate(const std::string&, const v1::ListJobsRequest& req) {
  CheckInvalid(server::ValidateTopic("topic", req.topic(), kLimits));
  CheckInvalid(server::ValidateIdPrefix("id_prefix", req.id_prefix(), kLimits));
  CheckInvalid(server::ValidateTimestamp("due_after", req.due_after()));
  CheckInvalid(server::ValidateTimestamp("due_before", req.due_before()));
  CheckInvalid(server::DecodePageToken(req).status());
}

void Validate(const std::string&, const v1::AckRequest& req) {
  for (int i = 0;
       i < req.ack_tokens_size() && static_cast<size_t>(i) < kLimits.max_batch;
       ++i) {
    CheckAckToken(absl::StrCat("ack_tokens[", i, "]"), req.ack_tokens(i));
  }
}

void Validate(const std::string&, const v1::NackRequest& req) {
  CheckAckToken("ack_token", req.ack_token());
}

void Validate(const std::string&, const v1::ExtendLeaseRequest& req) {
  CheckAckToken("ack_token", req.ack_token());
}

void Validate(const std::string&, const v1::RedriveRequest& req) {
  CheckInvalid(server::ValidateTopic("topic", req.topic(), kLimits));
  CheckInvalid(server::ValidateIdPrefix("id_prefix", req.id_prefix(), kLimits));
  CheckInvalid(server::ValidateId("id", req.id(), kLimits));
}

void Validate(const std::string&, const v1::GetStatsRequest& req) {
  if (!req.topic().empty()) {
    CheckInvalid(server::ValidateTopic("topic", req.topic(), kLimits));
  }
}

void Validate(const std::string&, const v1::PreviewScheduleRequest& req) {
  int64_t after_ms = kNowMs;
  if (req.has_after()) {
    const absl::Status s = server::ValidateTimestamp("after", req.after());
    CheckInvalid(s);
    if (!s.ok()) return;
    after_ms = delayd::storage::TimestampToUnixMs(req.after());
  }
  CheckRecurrence("recurrence", req.recurrence(), after_ms,
                  std::min(req.count() == 0 ? 10 : req.count(), kMaxPreview));
}

void Validate(const std::string&, const v1::PauseJobRequest& req) {
  CheckKey("key", req.key());
}

void Validate(const std::string&, const v1::ResumeJobRequest& req) {
  CheckKey("key", req.key());
}

void Validate(const std::string&, const v1::SubscribeRequest& req) {
  CheckInvalid(server::ValidateTopic("topic", req.topic(), kLimits));
}

template <typename Request>
void Fuzz(std::string_view bytes, bool split) {
  Request req;
  const absl::Status parsed = server::ParseRequest(ToBuffer(bytes, split), req);
  CheckInvalid(parsed);
  if (!parsed.ok()) return;
  CheckUtf8(req);
  const std::string again = Deterministic(req);
  Request reparsed;
  FUZZ_CHECK(server::ParseRequest(ToBuffer(again, false), reparsed).ok());
  FUZZ_CHECK(Deterministic(reparsed) == again);

  Validate("", req);
  std::string topic;
  FUZZ_CHECK(server::Authorize(server::Caller(), req, &topic).ok());
  const absl::Status allowed = server::Authorize(Principal(), req, &topic);
  FUZZ_CHECK(allowed.ok() ||
             allowed.code() == absl::StatusCode::kPermissionDenied);
}

// A message of ScheduleStream: split into its requests (SplitRepeated),
// each parsed and checked on its own as a StreamRequest. A message that
// protobuf parses whole is split into the same requests.
void FuzzStream(std::string_view bytes, bool split) {
  std::string flat;
  std::vector<std::string_view> items;
  const absl::Status s = server::SplitRepeated(
      ToBuffer(bytes, split), *v1::ScheduleStreamRequest::descriptor(),
      v1::ScheduleStreamRequest::kRequestsFieldNumber, flat, items);
  CheckInvalid(s);
  FUZZ_CHECK(flat == bytes);
  v1::ScheduleStreamRequest whole;
  const bool parsed_whole =
      whole.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  if (parsed_whole) {
    FUZZ_CHECK(s.ok());
    FUZZ_CHECK(items.size() == static_cast<size_t>(whole.requests_size()));
  }
  if (!s.ok()) return;
  for (size_t i = 0; i < items.size(); ++i) {
    FUZZ_CHECK(items[i].data() >= flat.data() &&
               items[i].data() + items[i].size() <= flat.data() + flat.size());
    v1::StreamRequest req;
    const absl::Status item = server::ParseRequest(items[i], req);
    CheckInvalid(item);
    if (parsed_whole) {
      FUZZ_CHECK(item.ok());
      FUZZ_CHECK(Deterministic(req) ==
                 Deterministic(whole.requests(static_cast<int>(i))));
    }
    if (!item.ok()) continue;
    CheckUtf8(req);
    std::string topic;
    if (req.has_schedule()) {
      Validate("", req.schedule());
      FUZZ_CHECK(
          server::Authorize(server::Caller(), req.schedule(), &topic).ok());
    } else if (req.has_reschedule()) {
      Validate("", req.reschedule());
    } else if (req.has_cancel()) {
      Validate("", req.cancel());
    }
  }
}

using FuzzFn = void (*)(std::string_view, bool);
constexpr FuzzFn kTypes[16] = {
    Fuzz<v1::ScheduleRequest>,
    Fuzz<v1::ScheduleBatchRequest>,
    Fuzz<v1::RescheduleRequest>,
    Fuzz<v1::CancelRequest>,
    Fuzz<v1::CancelByPrefixRequest>,
    Fuzz<v1::GetJobRequest>,
    Fuzz<v1::ListJobsRequest>,
    Fuzz<v1::AckRequest>,
    Fuzz<v1::NackRequest>,
    Fuzz<v1::ExtendLeaseRequest>,
    Fuzz<v1::RedriveRequest>,
    Fuzz<v1::GetStatsRequest>,
    Fuzz<v1::PreviewScheduleRequest>,
    Fuzz<v1::PauseJobRequest>,
    Fuzz<v1::ResumeJobRequest>,
    Fuzz<v1::SubscribeRequest>,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes = delayd::fuzz::AsText(data + 1, size - 1);
  const bool split = (data[0] & 0x10) != 0;
  if ((data[0] & 0x20) != 0) {
    FuzzStream(bytes, split);
  } else {
    kTypes[data[0] & 0x0f](bytes, split);
  }
  return 0;
}
