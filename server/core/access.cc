#include "server/core/access.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/base/log.h"
#include "server/delivery/ack_token.h"

namespace delayd::server {
namespace {

using auth::Permission;

// The auth library speaks std::string_view; Debian's Abseil has its own.
std::string_view Std(absl::string_view s) { return {s.data(), s.size()}; }

// Tokens longer than the largest flags allow cannot be delayd's: they are
// left for the job service to refuse.
const size_t kMaxTokenChars = MaxAckTokenChars(4096, 4096);

// The token of `authorization: Bearer TOKEN` ("bearer" in any case); ""
// when the value is not of that form.
absl::string_view BearerToken(absl::string_view value) {
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return "";
  }
  return absl::StripAsciiWhitespace(value.substr(kScheme.size()));
}

// The topic an ack token names; "" when it is not a token (the job service
// refuses it then, saying so).
std::string TokenTopic(absl::string_view token) {
  absl::StatusOr<AckToken> decoded =
      DecodeAckToken("ack_token", token, kMaxTokenChars);
  return decoded.ok() ? std::move(decoded->topic) : "";
}

absl::Status CheckTopic(const Caller& caller, Permission permission,
                        const std::string& topic, std::string* checked) {
  *checked = topic;
  return caller.Check(permission, topic);
}

absl::Status CheckToken(const Caller& caller, absl::string_view token,
                        std::string* checked) {
  if (caller.open()) return absl::OkStatus();  // no token decoded for nothing
  std::string topic = TokenTopic(token);
  if (topic.empty()) return absl::OkStatus();
  return CheckTopic(caller, Permission::kConsume, topic, checked);
}

// `text` in double quotes, with '"', '\\' and control bytes escaped: one
// audit line stays one line whatever a topic or message holds.
std::string Quoted(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppend(
          &out, "\\x",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace

absl::Status Caller::Check(Permission permission,
                           absl::string_view topic) const {
  if (principal_ == nullptr || principal_->Allows(permission, Std(topic))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("principal '", principal_->name, "' lacks ",
                   std::string(auth::PermissionName(permission)), " on topic '",
                   topic, "'"));
}

bool Caller::Everywhere(Permission permission) const {
  return principal_ == nullptr || principal_->AllowsEverywhere(permission);
}

absl::string_view Caller::name() const {
  if (principal_ == nullptr) return "-";
  return principal_->name;
}

absl::StatusOr<std::unique_ptr<Access>> Access::FromFile(std::string path) {
  absl::StatusOr<auth::AuthConfig> config = auth::AuthConfig::Load(path);
  if (!config.ok()) return config.status();
  auto access = std::make_unique<Access>();
  access->path_ = std::move(path);
  auto parsed = std::make_shared<const auth::AuthConfig>(*std::move(config));
  {
    absl::MutexLock lock(&access->mu_);  // not shared yet; the analysis asks
    access->config_ = std::move(parsed);
  }
  return access;
}

absl::Status Access::Reload() {
  if (open()) return absl::OkStatus();
  absl::StatusOr<auth::AuthConfig> config = auth::AuthConfig::Load(path_);
  if (!config.ok()) return config.status();
  auto fresh = std::make_shared<const auth::AuthConfig>(*std::move(config));
  absl::MutexLock lock(&mu_);
  config_ = std::move(fresh);
  return absl::OkStatus();
}

absl::StatusOr<Caller> Access::Authenticate(
    const Credentials& credentials) const {
  if (open()) return Caller();
  std::shared_ptr<const auth::AuthConfig> config;
  {
    absl::MutexLock lock(&mu_);
    config = config_;
  }
  if (credentials.authorization.has_value()) {
    const absl::string_view token = BearerToken(*credentials.authorization);
    if (token.empty()) {
      return absl::UnauthenticatedError(
          "'authorization' must be 'Bearer <token>'");
    }
    const auth::Principal* principal = config->FindByToken(Std(token));
    if (principal == nullptr) {
      return absl::UnauthenticatedError("unknown bearer token");
    }
    return Caller(std::move(config), principal);
  }
  for (const std::string& identity : credentials.identities) {
    const auth::Principal* principal = config->FindByIdentity(identity);
    if (principal != nullptr) return Caller(std::move(config), principal);
  }
  if (!credentials.identities.empty()) {
    return absl::UnauthenticatedError(
        "the client certificate names no principal of the auth file");
  }
  return absl::UnauthenticatedError(
      "no credential: send 'authorization: Bearer <token>' or a client "
      "certificate of a principal");
}

void Audit(const Caller& caller, absl::string_view method,
           absl::string_view topic, const absl::Status& outcome) {
  DELAYD_LOG_INFO("audit principal=%s method=%s topic=%s outcome=%s%s%s",
                  Quoted(caller.name()), method, Quoted(topic),
                  absl::StatusCodeToString(outcome.code()),
                  outcome.ok() ? "" : " message=",
                  outcome.ok() ? "" : Quoted(outcome.message()));
}

absl::Status Authorize(const Caller& caller, const v1::ScheduleRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kSchedule, r.job().topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::ScheduleBatchRequest& r,
                       std::string* topic) {
  for (const v1::ScheduleRequest& one : r.requests()) {
    if (absl::Status s = Authorize(caller, one, topic); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Authorize(const Caller& caller, const v1::RescheduleRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kSchedule, r.key().topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::CancelRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kCancel, r.key().topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::CancelByPrefixRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kAdmin, r.topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::GetJobRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kRead, r.key().topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::ListJobsRequest& r,
                       std::string* topic) {
  // ListJobs lists one topic; without one it is INVALID_ARGUMENT (the job
  // service says so), whoever asks.
  if (r.topic().empty()) return absl::OkStatus();
  return CheckTopic(caller, Permission::kRead, r.topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::SubscribeRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kConsume, r.topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::AckRequest& r,
                       std::string* topic) {
  for (const std::string& token : r.ack_tokens()) {
    if (absl::Status s = CheckToken(caller, token, topic); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Authorize(const Caller& caller, const v1::NackRequest& r,
                       std::string* topic) {
  return CheckToken(caller, r.ack_token(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::ExtendLeaseRequest& r,
                       std::string* topic) {
  return CheckToken(caller, r.ack_token(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::RedriveRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kAdmin, r.topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::GetStatsRequest& r,
                       std::string* topic) {
  if (r.topic().empty()) {  // every topic: Restrict trims the answer
    topic->clear();
    return absl::OkStatus();
  }
  return CheckTopic(caller, Permission::kRead, r.topic(), topic);
}

absl::Status Authorize(const Caller& /*caller*/,
                       const v1::PreviewScheduleRequest& /*r*/,
                       std::string* topic) {
  topic->clear();  // a calendar computation: it reads and writes no job
  return absl::OkStatus();
}

absl::Status Authorize(const Caller& caller, const v1::PauseJobRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kSchedule, r.key().topic(), topic);
}

absl::Status Authorize(const Caller& caller, const v1::ResumeJobRequest& r,
                       std::string* topic) {
  return CheckTopic(caller, Permission::kSchedule, r.key().topic(), topic);
}

void Restrict(const Caller& caller, const v1::GetStatsRequest& request,
              v1::GetStatsResponse* response) {
  if (!request.topic().empty() || caller.Everywhere(Permission::kRead)) {
    return;
  }
  auto* topics = response->mutable_topics();
  std::vector<v1::TopicStats> kept;
  for (v1::TopicStats& t : *topics) {
    if (caller.Check(Permission::kRead, t.topic()).ok()) {
      kept.push_back(std::move(t));
    }
  }
  topics->Clear();
  for (v1::TopicStats& t : kept) *topics->Add() = std::move(t);
  response->clear_due_soon();
  response->clear_fire_lateness();
}

bool IsAdminMethod(absl::string_view method) {
  return method == "CancelByPrefix" || method == "Redrive";
}

}  // namespace delayd::server
