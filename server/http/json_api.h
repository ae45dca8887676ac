// JsonApi: the HTTP/JSON face of the JobService, beside the gRPC one
// (rpc/): the same calls, their messages in protobuf's JSON mapping, the
// JobService's status mapped to an HTTP status in one place (http_reply.h).
// It knows nothing of sockets: HttpServer hands it the method, the decoded
// path, the raw query string and the body, so tests drive it directly.
//
// Routes (under /api/v1; {id} is the rest of the path, so it may hold '/';
// a custom verb follows the last ':' of the path):
//   POST   /jobs                                  Schedule
//   POST   /jobs:batch                            ScheduleBatch
//   GET    /topics/{topic}/jobs/{id}              GetJob
//   DELETE /topics/{topic}/jobs/{id}              Cancel
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
// refused. A GET takes the request's fields as query parameters, named as
// in the proto or in JSON (`state` and `prefix` are short for `states` and
// `id_prefix`; an enum value may drop its prefix: state=DEAD). The reply
// is the response message as JSON, every field shown (zeros too). bytes
// fields (payload) are base64, as the JSON mapping says. Streaming delivery
// (Subscribe, Ack) stays gRPC-only.
//
// Until StartServing, and from StartDraining on, every call answers 503.
// Thread-safe.
#ifndef DELAYD_SERVER_HTTP_JSON_API_H_
#define DELAYD_SERVER_HTTP_JSON_API_H_

#include <atomic>
#include <cstddef>

#include "absl/strings/string_view.h"
#include "server/core/job_service.h"
#include "server/http/http_reply.h"

namespace delayd::server {

class JsonApi {
 public:
  // Request bodies beyond this are refused with 413 (as gRPC refuses
  // messages beyond 16 MiB).
  static constexpr size_t kMaxBodyBytes = size_t{16} << 20;
  static constexpr absl::string_view kPrefix = "/api/v1";

  // `jobs` must outlive the api.
  explicit JsonApi(JobService* jobs) : jobs_(jobs) {}
  JsonApi(const JsonApi&) = delete;
  JsonApi& operator=(const JsonApi&) = delete;

  void StartServing() { serving_.store(true); }
  void StartDraining() { serving_.store(false); }
  bool serving() const { return serving_.load(); }

  // One call: `path` starts with kPrefix and is percent-decoded; `query` is
  // the raw query string (after '?', "" if none).
  HttpReply Handle(absl::string_view method, absl::string_view path,
                   absl::string_view query, absl::string_view body) const;

 private:
  JobService* const jobs_;
  std::atomic<bool> serving_{false};
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_HTTP_JSON_API_H_
