#include "server/http/http_reply.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace delayd::server {
namespace {

// The length of the UTF-8 sequence at the start of `s`, or 0 when it is not
// one (overlong forms, surrogates and code points past U+10FFFF included).
size_t Utf8Length(absl::string_view s) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = b(0);
  if (lead < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((lead & 0xe0) == 0xc0) {
    n = 2;
    cp = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    n = 3;
    cp = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    n = 4;
    cp = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

HttpReply ErrorReply(const absl::Status& status) {
  // StatusCodeToString names a code as gRPC does: "NOT_FOUND".
  return ErrorReply(HttpStatusOf(status.code()),
                    absl::StatusCodeToString(status.code()), status.message());
}

HttpReply ErrorReply(int code, absl::string_view status_name,
                     absl::string_view message) {
  HttpReply reply;
  reply.code = code;
  reply.body = absl::StrCat("{\"error\":{\"code\":", code,
                            ",\"status\":", JsonQuote(status_name),
                            ",\"message\":", JsonQuote(message), "}}\n");
  return reply;
}

HttpReply NoRoute(absl::string_view method, absl::string_view path) {
  return ErrorReply(404, "NOT_FOUND",
                    absl::StrCat("no route ", method, " ", path,
                                 " (the routes: docs/http.md)"));
}

HttpReply MethodNotAllowed(absl::string_view method, absl::string_view path,
                           absl::string_view allow) {
  HttpReply reply =
      ErrorReply(405, "METHOD_NOT_ALLOWED",
                 absl::StrCat(path, " takes ", allow, ", not ", method));
  reply.allow = std::string(allow);
  return reply;
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  while (!text.empty()) {
    const char c = text.front();
    const size_t n = Utf8Length(text);
    if (n == 0) {
      out += "\\ufffd";
      text.remove_prefix(1);
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
    } else if (c == '<' || c == '>' || c == '&') {
      // Safe to embed in HTML, should a page ever do so.
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
    } else {
      out.append(text.data(), n);
    }
    text.remove_prefix(n);
  }
  out += '"';
  return out;
}

}  // namespace delayd::server
