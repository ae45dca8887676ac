// JsonApi: the HTTP/JSON face of the JobService, beside the gRPC one
// (rpc/): the same calls, their messages in protobuf's JSON mapping, the
// JobService's status mapped to an HTTP status in one place (http_reply.h).
// It knows nothing of sockets: HttpServer hands it an HttpRequest (the path
// and query as sent, the body), so tests drive it directly.
//
// Routes (under /api/v1; {id} is the rest of the path, so it may hold '/';
// a custom verb follows the last ':' of the path; topic and id are
// percent-decoded after the path is split, so %2F and %3A are in them):
//   POST   /jobs                                  Schedule
//   POST   /jobs:batch                            ScheduleBatch
//   GET    /topics/{topic}/jobs/{id}              GetJob
//   DELETE /topics/{topic}/jobs/{id}              Cancel
//   POST   /topics/{topic}/jobs/{id}:cancel       Cancel (for forms)
//   POST   /topics/{topic}/jobs/{id}:reschedule   Reschedule
//   POST   /topics/{topic}/jobs/{id}:pause        PauseJob
//   POST   /topics/{topic}/jobs/{id}:resume       ResumeJob
//   GET    /topics/{topic}/jobs                   ListJobs
//   POST   /topics/{topic}/jobs:cancelByPrefix    CancelByPrefix
//   POST   /topics/{topic}:redrive                Redrive
//   GET    /stats                                 GetStats
//   POST   /recurrences:preview                   PreviewSchedule
// A POST body is the rpc's request message as JSON (empty: all defaults);
// the topic and id in the path fill its key, and a body naming another is
// refused; a query is refused too. A GET takes the request's fields as
// query parameters (each once, but `state`), named as
// in the proto or in JSON (`state` and `prefix` are short for `states` and
// `id_prefix`; an enum value may drop its prefix: state=DEAD). The reply
// is the response message as JSON, every field shown (zeros too). bytes
// fields (payload) are base64, as the JSON mapping says. Streaming delivery
// (Subscribe, Ack) stays gRPC-only.
//
// CSRF: a call that may change state (POST, DELETE, PUT, PATCH) made by a
// browser (it sends Origin or Sec-Fetch-Site) must carry the header
// X-CSRF-Token with csrf_token(), which only the console's own page holds
// (HttpServer puts it in index.html); else 403. Scripts and services (curl, no
// such headers) need no token.
//
// Access (core/access.h): with an auth file, every call needs the header
// `Authorization: Bearer TOKEN` of a principal (else 401) and its grants
// (else 403) and quotas (else 429), as over gRPC; the console, which holds no
// token, then gets 401 too. Refusals and admin calls are audited.
//
// Until StartServing, and from StartDraining on, every call answers 503.
// Thread-safe.
#ifndef DELAYD_SERVER_HTTP_JSON_API_H_
#define DELAYD_SERVER_HTTP_JSON_API_H_

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "server/core/access.h"
#include "server/core/job_service.h"
#include "server/core/quota_keeper.h"
#include "server/http/http_reply.h"

namespace delayd::server {

// One HTTP request as JsonApi reads it.
struct HttpRequest {
  absl::string_view method;
  absl::string_view path;   // as sent (percent-encoded), from kPrefix on
  absl::string_view query;  // raw, after '?'; "" if none
  absl::string_view body;
  bool from_browser = false;     // it had Origin or Sec-Fetch-Site
  absl::string_view csrf_token;  // its X-CSRF-Token header
  // Its Authorization header, when it has one.
  std::optional<absl::string_view> authorization;
};

class JsonApi {
 public:
  // Request bodies beyond this are refused with 413 (as gRPC refuses
  // messages beyond 16 MiB).
  static constexpr size_t kMaxBodyBytes = size_t{16} << 20;
  static constexpr absl::string_view kPrefix = "/api/v1";

  // `jobs`, `access` and `quotas` must outlive the api; null `access` is
  // open access, null `quotas` no quota. Draws a new random CSRF token.
  explicit JsonApi(JobService* jobs, const Access* access = nullptr,
                   QuotaKeeper* quotas = nullptr);
  JsonApi(const JsonApi&) = delete;
  JsonApi& operator=(const JsonApi&) = delete;

  void StartServing() { serving_.store(true); }
  void StartDraining() { serving_.store(false); }
  bool serving() const { return serving_.load(); }

  // 32 hex digits, fixed for the process.
  const std::string& csrf_token() const { return csrf_token_; }

  HttpReply Handle(const HttpRequest& request) const;

 private:
  JobService* const jobs_;
  const Access* const access_;
  QuotaKeeper* const quotas_;
  const std::string csrf_token_;
  std::atomic<bool> serving_{false};
};

// GetStatsResponse in protobuf's JSON mapping, as Reply prints every other
// response (always_print_primitive_fields), but with the topics written
// here: the console asks for every topic once a second, and protobuf's
// printer costs some 10 us per topic. The rest goes through the printer.
std::string GetStatsJson(const v1::GetStatsResponse& response);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_HTTP_JSON_API_H_
