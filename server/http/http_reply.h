// HttpReply: an HTTP response as the HTTP layer computes it, before
// CivetWeb writes it; and the one place where an absl::Status becomes an
// HTTP status and an error body (as rpc/ converts to grpc::Status in one
// place).
//
// The codes map the way Google's HTTP APIs map gRPC's: INVALID_ARGUMENT,
// FAILED_PRECONDITION, OUT_OF_RANGE 400; UNAUTHENTICATED 401;
// PERMISSION_DENIED 403; NOT_FOUND 404; ALREADY_EXISTS, ABORTED 409;
// RESOURCE_EXHAUSTED 429; CANCELLED 499; UNIMPLEMENTED 501; UNAVAILABLE
// 503; DEADLINE_EXCEEDED 504; the rest 500. An error body is JSON:
//   {"error": {"code": 404, "status": "NOT_FOUND", "message": "..."}}
#ifndef DELAYD_SERVER_HTTP_HTTP_REPLY_H_
#define DELAYD_SERVER_HTTP_HTTP_REPLY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace delayd::server {

struct HttpReply {
  int code = 200;
  std::string content_type = "application/json";
  std::string body;
  // 405 only: the methods the path takes ("GET, DELETE").
  std::string allow;
};

int HttpStatusOf(absl::StatusCode code);

// The reply for a failed call: HttpStatusOf its code, the JSON error body.
// REQUIRES: !status.ok().
HttpReply ErrorReply(const absl::Status& status);
// An error with an HTTP status of its own (404 no route, 405, 413), which
// it names with `status_name` ("METHOD_NOT_ALLOWED").
HttpReply ErrorReply(int code, absl::string_view status_name,
                     absl::string_view message);

// 404 for a path no route takes, 405 for a method its route does not
// (`allow`: "GET, DELETE").
HttpReply NoRoute(absl::string_view method, absl::string_view path);
HttpReply MethodNotAllowed(absl::string_view method, absl::string_view path,
                           absl::string_view allow);

// `text` as a JSON string literal, quotes included. Bytes that are not
// UTF-8 become U+FFFD.
std::string JsonQuote(absl::string_view text);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_HTTP_HTTP_REPLY_H_
