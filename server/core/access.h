// Access: who a call comes from, and whether it may do what it asks
// (docs/security.md). Both faces use it: gRPC (rpc/) and HTTP (http/), each
// handing over the call's Credentials.
//
// Without an auth file every call is allowed, as on a laptop (a loopback
// address; Config's CheckSecurity refuses any other without one). With an
// auth file, a call comes from one of its principals:
// - the one whose bearer token it carries (gRPC metadata or HTTP header
//   `authorization: Bearer TOKEN`), compared by SHA-256;
// - else, over mutual TLS, the one whose identity its client certificate
//   names (a subject alternative name, or the common name).
// A wrong token, or no credential of any principal, is UNAUTHENTICATED. A
// principal outside its grants gets PERMISSION_DENIED naming the permission
// and the topic it asked about, never anything of other topics: Authorize
// checks each request before it reaches the job service, and Restrict trims
// what a cross-topic read (GetStats without a topic) answers.
//
// Every refused call and every admin call is written to the log as one
// `audit` line: principal, method, topic, outcome.
//
// Reload (SIGHUP) swaps the file whole; a call keeps the file it was
// authenticated under. Thread-safe.
#ifndef DELAYD_SERVER_CORE_ACCESS_H_
#define DELAYD_SERVER_CORE_ACCESS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "delayd/v1/recurrence.pb.h"
#include "server/auth/auth_config.h"

namespace delayd::server {

// The caller of one call: its principal, and the auth file that names it
// (kept alive across a reload). Open access has no principal and may do
// everything.
class Caller {
 public:
  // Open access.
  Caller() = default;
  Caller(std::shared_ptr<const auth::AuthConfig> config,
         const auth::Principal* principal)
      : config_(std::move(config)), principal_(principal) {}

  // OK, or PERMISSION_DENIED "<principal> lacks <permission> on topic
  // '<topic>'".
  absl::Status Check(auth::Permission permission,
                     absl::string_view topic) const;
  // Whether `permission` holds on every topic (a grant on "*").
  bool Everywhere(auth::Permission permission) const;
  bool open() const { return principal_ == nullptr; }
  // Null for open access.
  const auth::Principal* principal() const { return principal_; }
  // The principal's name; "-" for open access.
  absl::string_view name() const;

 private:
  std::shared_ptr<const auth::AuthConfig> config_;
  const auth::Principal* principal_ = nullptr;
};

// What a call presents to prove who it is.
struct Credentials {
  // The `authorization` metadata or header, when the call has one.
  std::optional<absl::string_view> authorization;
  // The verified client certificate's SANs and CN (mutual TLS); empty
  // without one.
  std::vector<std::string> identities;
};

class Access {
 public:
  // Open access: every call is allowed.
  Access() = default;
  // Access by the auth file at `path`; its error (naming the path or the
  // line) when it cannot be read.
  static absl::StatusOr<std::unique_ptr<Access>> FromFile(std::string path);
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;

  // Reads the auth file again. On an error the current one stays, and the
  // error is returned. Open access: OK, nothing to read.
  absl::Status Reload();

  bool open() const { return path_.empty(); }

  // The caller of a call: the principal of its bearer token, else of its
  // certificate; UNAUTHENTICATED when neither names one (a token that is
  // not a principal's is refused even with a known certificate).
  absl::StatusOr<Caller> Authenticate(const Credentials& credentials) const;

 private:
  std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const auth::AuthConfig> config_ ABSL_GUARDED_BY(mu_);
};

// One `audit` log line: who, which rpc, which topic ("" for none), and the
// outcome (the status code's name, and its message when not OK).
void Audit(const Caller& caller, absl::string_view method,
           absl::string_view topic, const absl::Status& outcome);

// Whether `caller` may make this request: OK, or PERMISSION_DENIED naming
// the permission and the topic. `topic` is set to the topic checked (the
// first refused one; "" when the request names none).
absl::Status Authorize(const Caller& caller, const v1::ScheduleRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::ScheduleBatchRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::RescheduleRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::CancelRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::CancelByPrefixRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::GetJobRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::ListJobsRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::SubscribeRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::AckRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::NackRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::ExtendLeaseRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::RedriveRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::GetStatsRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller,
                       const v1::PreviewScheduleRequest& r, std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::PauseJobRequest& r,
                       std::string* topic);
absl::Status Authorize(const Caller& caller, const v1::ResumeJobRequest& r,
                       std::string* topic);

// Trims an answer to what `caller` may read: GetStats of every topic keeps
// only the caller's readable topics, and drops the all-topic due-soon
// chart and lateness histogram unless it may read every topic. Every other
// answer is about the topics Authorize checked, and is left as it is.
void Restrict(const Caller& caller, const v1::GetStatsRequest& request,
              v1::GetStatsResponse* response);
template <typename Request, typename Response>
void Restrict(const Caller& /*caller*/, const Request& /*request*/,
              Response* /*response*/) {}

// Whether an rpc is an admin action, audited also when it succeeds.
bool IsAdminMethod(absl::string_view method);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_ACCESS_H_
