#include "delayd/client.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/backoff.h"
#include "client/connection/await_ready.h"
#include "client/connection/credentials.h"
#include "client/schedule_pipe.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace delayd::client {
namespace {

// gRPC and Abseil codes are the same numbers.
absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  const int max_ms = static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(options.max_reconnect_backoff), 1, 120'000));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(200, max_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  // After a failed connection gRPC 1.51 connects again only once the
  // resolver has answered anew, and the DNS resolver answers at most every
  // 30 s by default: a restarted server would stay unseen that long.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, max_ms);
  // gRPC calls the connect timeout "min reconnect backoff".
  args.SetInt(
      GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
      static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(options.connect_timeout), 100, 120'000)));
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials != nullptr ? options.credentials
                                     : grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(options.target, credentials, args);
}

// Retries of Schedule are safe only when the server will not mint an id.
bool AllHaveIds(const std::vector<v1::ScheduleRequest>& requests) {
  return std::all_of(
      requests.begin(), requests.end(),
      [](const v1::ScheduleRequest& r) { return !r.job().id().empty(); });
}

v1::JobKey KeyOf(const std::string& topic, const std::string& id) {
  v1::JobKey key;
  key.set_topic(topic);
  key.set_id(id);
  return key;
}

// The token a Client sends: its options', else the environment's.
std::string TokenOf(const ClientOptions& options) {
  return options.token.empty() ? connection::TokenFromEnvironment()
                               : options.token;
}

// Why the token cannot be sent, naming where it came from; OK if it can.
absl::Status CheckTokenOf(const ClientOptions& options,
                          const std::string& token) {
  absl::Status s = connection::CheckToken(token);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(
      options.token.empty() ? "$DELAYD_TOKEN" : "ClientOptions::token", ": ",
      s.message()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(
    const std::string& ca_file, const std::string& cert_file,
    const std::string& key_file) {
  return connection::TlsChannelCredentials(ca_file, cert_file, key_file);
}

DeliveryStream::~DeliveryStream() {
  if (!finished_ && reader_ != nullptr) {
    context_.TryCancel();
    v1::SubscribeResponse ignored;
    while (reader_->Read(&ignored)) {
    }
    (void)reader_->Finish();
  }
}

bool DeliveryStream::Next(v1::Delivery* delivery) {
  if (reader_ == nullptr) return false;
  while (next_ == message_.deliveries_size()) {
    next_ = 0;
    if (!reader_->Read(&message_)) {
      message_.Clear();
      return false;
    }
  }
  delivery->Swap(message_.mutable_deliveries(next_++));
  return true;
}

void DeliveryStream::Cancel() { context_.TryCancel(); }

absl::Status DeliveryStream::Finish() {
  finished_ = true;
  if (reader_ == nullptr) return error_;
  return FromGrpc(reader_->Finish());
}

Client::Client(ClientOptions options) : Client(MakeChannel(options), options) {}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)),
      token_(TokenOf(options_)),
      token_error_(CheckTokenOf(options_, token_)),
      channel_(std::move(channel)),
      stub_(v1::DelayQueue::NewStub(channel_)),
      pipe_(options_.schedule_stream
                ? std::make_unique<SchedulePipe>(
                      channel_.get(), stub_.get(),
                      [this](grpc::ClientContext* c) { Authorize(c); },
                      SchedulePipe::Options{
                          .max_batch = 1000,
                          .linger =
                              std::clamp(options_.linger, absl::ZeroDuration(),
                                         absl::Seconds(1))})
                : nullptr) {}

Client::~Client() = default;

void Client::Authorize(grpc::ClientContext* context) const {
  if (!token_.empty()) {
    context->AddMetadata(connection::kAuthorizationKey,
                         connection::AuthorizationValue(token_));
  }
}

// Runs `attempt(deadline)` until it succeeds, fails with a code other than
// UNAVAILABLE, runs out of attempts, or the next backoff would pass the
// deadline. Every attempt shares the call's one deadline.
template <typename Fn>
absl::Status Client::Retrying(bool retry, const CallOptions& call, Fn attempt) {
  if (!token_error_.ok()) return token_error_;
  const absl::Time deadline =
      absl::Now() + call.deadline.value_or(options_.default_deadline);
  const RpcRetryPolicy& policy = call.retry.value_or(options_.retry);
  const int max_attempts = retry ? std::max(1, policy.max_attempts) : 1;
  absl::Duration backoff = policy.initial_backoff;
  absl::BitGen random;
  // After a failed connection attempt the next comes within
  // max_reconnect_backoff (the backoff and the resolver's rate are capped
  // there, MakeChannel): wait for it, and a second for its handshakes.
  connection::AwaitReady(*channel_, deadline,
                         options_.max_reconnect_backoff + absl::Seconds(1));
  for (int n = 1;; ++n) {
    const grpc::Status status = attempt(deadline);
    if (status.ok()) return absl::OkStatus();
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        n >= max_attempts) {
      absl::Status result = FromGrpc(status);
      if (n > 1) {
        result = absl::Status(
            result.code(),
            absl::StrCat(result.message(), " (after ", n, " attempts)"));
      }
      return result;
    }
    const absl::Duration sleep = Jittered(random, backoff);
    if (absl::Now() + sleep >= deadline) {
      return absl::Status(
          absl::StatusCode::kUnavailable,
          absl::StrCat(status.error_message(), " (after ", n,
                       " attempts; the deadline leaves no time to retry)"));
    }
    absl::SleepFor(sleep);
    backoff = std::min(backoff * policy.backoff_multiplier, policy.max_backoff);
  }
}

template <typename Fn>
absl::Status Client::Call(bool retry, const CallOptions& call, Fn attempt) {
  return Retrying(retry, call, [&](absl::Time deadline) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    Authorize(&context);
    return attempt(&context);
  });
}

absl::Status Client::Streamed(bool retry, const CallOptions& call,
                              const v1::StreamRequest& request,
                              v1::StreamAnswer* answer) {
  return Retrying(retry, call, [&](absl::Time deadline) {
    grpc::Status s = pipe_->Call(request, deadline, answer);
    if (!s.ok() || answer->code() == 0) return s;
    return grpc::Status(static_cast<grpc::StatusCode>(answer->code()),
                        answer->message());
  });
}

absl::StatusOr<v1::ScheduleResponse> Client::Schedule(const v1::JobSpec& job,
                                                      v1::IfExists if_exists,
                                                      const CallOptions& call) {
  if (pipe_ != nullptr) {
    v1::StreamRequest request;
    *request.mutable_schedule()->mutable_job() = job;
    request.mutable_schedule()->set_if_exists(if_exists);
    v1::StreamAnswer answer;
    absl::Status s = Streamed(!job.id().empty(), call, request, &answer);
    if (!s.ok()) return s;
    return std::move(*answer.mutable_schedule());
  }
  v1::ScheduleRequest request;
  *request.mutable_job() = job;
  request.set_if_exists(if_exists);
  v1::ScheduleResponse response;
  absl::Status s = Call(!job.id().empty(), call, [&](grpc::ClientContext* c) {
    return stub_->Schedule(c, request, &response);
  });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<std::vector<v1::ScheduleResult>> Client::ScheduleBatch(
    const std::vector<v1::ScheduleRequest>& requests, const CallOptions& call) {
  v1::ScheduleBatchRequest request;
  request.mutable_requests()->Add(requests.begin(), requests.end());
  v1::ScheduleBatchResponse response;
  absl::Status s =
      Call(AllHaveIds(requests), call, [&](grpc::ClientContext* c) {
        return stub_->ScheduleBatch(c, request, &response);
      });
  if (!s.ok()) return s;
  return std::vector<v1::ScheduleResult>(response.results().begin(),
                                         response.results().end());
}

absl::StatusOr<v1::Job> Client::Reschedule(const std::string& topic,
                                           const std::string& id,
                                           absl::Duration delay,
                                           const CallOptions& call) {
  v1::RescheduleRequest request;
  *request.mutable_delay() = ToProto(delay);
  return DoReschedule(topic, id, std::move(request), call);
}

absl::StatusOr<v1::Job> Client::Reschedule(const std::string& topic,
                                           const std::string& id,
                                           absl::Time fire_at,
                                           const CallOptions& call) {
  v1::RescheduleRequest request;
  *request.mutable_fire_at() = ToProto(fire_at);
  return DoReschedule(topic, id, std::move(request), call);
}

absl::StatusOr<v1::Job> Client::DoReschedule(const std::string& topic,
                                             const std::string& id,
                                             v1::RescheduleRequest request,
                                             const CallOptions& call) {
  *request.mutable_key() = KeyOf(topic, id);
  if (pipe_ != nullptr) {
    v1::StreamRequest streamed;
    *streamed.mutable_reschedule() = std::move(request);
    v1::StreamAnswer answer;
    absl::Status s = Streamed(true, call, streamed, &answer);
    if (!s.ok()) return s;
    return std::move(*answer.mutable_reschedule()->mutable_job());
  }
  v1::RescheduleResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->Reschedule(c, request, &response);
  });
  if (!s.ok()) return s;
  return std::move(*response.mutable_job());
}

absl::StatusOr<v1::CancelResponse> Client::Cancel(const std::string& topic,
                                                  const std::string& id,
                                                  const CallOptions& call) {
  v1::CancelRequest request;
  *request.mutable_key() = KeyOf(topic, id);
  if (pipe_ != nullptr) {
    v1::StreamRequest streamed;
    *streamed.mutable_cancel() = std::move(request);
    v1::StreamAnswer answer;
    absl::Status s = Streamed(false, call, streamed, &answer);
    if (!s.ok()) return s;
    return std::move(*answer.mutable_cancel());
  }
  v1::CancelResponse response;
  absl::Status s = Call(false, call, [&](grpc::ClientContext* c) {
    return stub_->Cancel(c, request, &response);
  });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<uint64_t> Client::CancelByPrefix(const std::string& topic,
                                                const std::string& id_prefix,
                                                const CallOptions& call) {
  v1::CancelByPrefixRequest request;
  request.set_topic(topic);
  request.set_id_prefix(id_prefix);
  v1::CancelByPrefixResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->CancelByPrefix(c, request, &response);
  });
  if (!s.ok()) return s;
  return response.canceled();
}

absl::StatusOr<v1::Job> Client::GetJob(const std::string& topic,
                                       const std::string& id,
                                       const CallOptions& call) {
  v1::GetJobRequest request;
  *request.mutable_key() = KeyOf(topic, id);
  v1::Job response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->GetJob(c, request, &response);
  });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListJobsResponse> Client::ListJobs(
    const v1::ListJobsRequest& request, const CallOptions& call) {
  v1::ListJobsResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->ListJobs(c, request, &response);
  });
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<std::vector<v1::Job>> Client::ListAllJobs(
    v1::ListJobsRequest request, const CallOptions& call) {
  std::vector<v1::Job> jobs;
  while (true) {
    absl::StatusOr<v1::ListJobsResponse> page = ListJobs(request, call);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) jobs.push_back(std::move(job));
    if (page->next_page_token().empty()) return jobs;
    request.set_page_token(page->next_page_token());
  }
}

std::unique_ptr<DeliveryStream> Client::Subscribe(const std::string& topic,
                                                  const std::string& consumer,
                                                  uint32_t max_in_flight,
                                                  uint32_t max_batch) {
  v1::SubscribeRequest request;
  request.set_topic(topic);
  request.set_consumer(consumer);
  request.set_max_in_flight(max_in_flight);
  request.set_max_batch(max_batch);
  std::unique_ptr<DeliveryStream> stream(new DeliveryStream());
  if (!token_error_.ok()) {
    stream->error_ = token_error_;
    return stream;
  }
  Authorize(&stream->context_);
  stream->reader_ = stub_->Subscribe(&stream->context_, request);
  return stream;
}

absl::StatusOr<std::vector<v1::AckResult>> Client::Ack(
    const std::vector<std::string>& ack_tokens, const CallOptions& call) {
  v1::AckRequest request;
  request.mutable_ack_tokens()->Add(ack_tokens.begin(), ack_tokens.end());
  v1::AckResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->Ack(c, request, &response);
  });
  if (!s.ok()) return s;
  return std::vector<v1::AckResult>(response.results().begin(),
                                    response.results().end());
}

absl::StatusOr<v1::Job> Client::Nack(const std::string& ack_token,
                                     std::optional<absl::Duration> retry_after,
                                     const std::string& reason,
                                     bool dead_letter,
                                     const CallOptions& call) {
  v1::NackRequest request;
  request.set_ack_token(ack_token);
  if (retry_after.has_value()) {
    *request.mutable_retry_after() = ToProto(*retry_after);
  }
  request.set_reason(reason);
  request.set_dead_letter(dead_letter);
  v1::NackResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->Nack(c, request, &response);
  });
  if (!s.ok()) return s;
  return std::move(*response.mutable_job());
}

absl::StatusOr<absl::Time> Client::ExtendLease(const std::string& ack_token,
                                               absl::Duration extend_by,
                                               const CallOptions& call) {
  v1::ExtendLeaseRequest request;
  request.set_ack_token(ack_token);
  *request.mutable_extend_by() = ToProto(extend_by);
  v1::ExtendLeaseResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->ExtendLease(c, request, &response);
  });
  if (!s.ok()) return s;
  return FromProto(response.lease_expires_at());
}

absl::StatusOr<uint64_t> Client::Redrive(const std::string& topic,
                                         const std::string& id_prefix,
                                         const CallOptions& call) {
  v1::RedriveRequest request;
  request.set_topic(topic);
  request.set_id_prefix(id_prefix);
  v1::RedriveResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->Redrive(c, request, &response);
  });
  if (!s.ok()) return s;
  return response.redriven();
}

absl::StatusOr<std::vector<v1::TopicStats>> Client::GetStats(
    const std::string& topic, const CallOptions& call) {
  v1::GetStatsRequest request;
  request.set_topic(topic);
  v1::GetStatsResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return stub_->GetStats(c, request, &response);
  });
  if (!s.ok()) return s;
  return std::vector<v1::TopicStats>(response.topics().begin(),
                                     response.topics().end());
}

absl::Status Client::CheckHealth(const CallOptions& call) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  absl::Status s = Call(true, call, [&](grpc::ClientContext* c) {
    return health->Check(c, request, &response);
  });
  if (!s.ok()) return s;
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat("server health is ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                         response.status())));
  }
  return absl::OkStatus();
}

}  // namespace delayd::client
