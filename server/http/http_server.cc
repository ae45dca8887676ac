#include "server/http/http_server.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "server/http/console_files.h"
#include "server/http/http_reply.h"

namespace delayd::server {
namespace {

constexpr char kPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

// HEAD: the headers of the reply, without its body.
void Send(mg_connection* conn, const HttpReply& reply, bool head) {
  mg_response_header_start(conn, reply.code);
  mg_response_header_add(conn, "Content-Type", reply.content_type.c_str(), -1);
  const std::string length = absl::StrCat(reply.body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  // The console's pages run only their own script and style (no inline
  // code: a job's id or payload that slipped into a page would not run),
  // and no other site frames them.
  mg_response_header_add(conn, "Content-Security-Policy", kPolicy, -1);
  mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
  mg_response_header_add(conn, "X-Frame-Options", "DENY", -1);
  mg_response_header_add(conn, "Referrer-Policy", "no-referrer", -1);
  if (!reply.allow.empty()) {
    mg_response_header_add(conn, "Allow", reply.allow.c_str(), -1);
  }
  mg_response_header_send(conn);
  if (!head) mg_write(conn, reply.body.data(), reply.body.size());
}

// The request body, or 413 past JsonApi::kMaxBodyBytes.
std::optional<std::string> ReadBody(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info->content_length > static_cast<long long>(JsonApi::kMaxBodyBytes)) {
    return std::nullopt;
  }
  std::string body;
  if (info->content_length > 0) {
    body.reserve(static_cast<size_t>(info->content_length));
  }
  char buffer[16384];
  while (true) {
    const int n = mg_read(conn, buffer, sizeof buffer);
    if (n <= 0) break;
    if (body.size() + static_cast<size_t>(n) > JsonApi::kMaxBodyBytes) {
      return std::nullopt;
    }
    body.append(buffer, static_cast<size_t>(n));
  }
  return body;
}

// Whether `host` (a Host header, or a listen address: name or address,
// with or without its port) names this machine's loopback.
bool IsLoopback(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[")) {
    host = host.substr(0, host.find(']'));  // [::1]:9400
  } else if (host.find(':') == host.rfind(':')) {
    // name:port or name (a bare IPv6 address, "::1", has more colons)
    host = host.substr(0, host.find(':'));
  }
  // 127.x.y.z as an address, not a name that starts so
  // ("127.0.0.1.example.com" is the attacker's); browsers resolve
  // *.localhost to loopback themselves.
  const bool ipv4_loopback =
      absl::StartsWith(host, "127.") &&
      host.find_first_not_of("0123456789.") == absl::string_view::npos &&
      std::count(host.begin(), host.end(), '.') == 3;
  return ipv4_loopback || host == "localhost" ||
         absl::EndsWith(host, ".localhost") || host == "::1";
}

// One handler for every method: each route checks its own (and answers
// 405 naming the ones it takes). A server on loopback answers only requests
// whose Host names loopback: a page of another site whose name was
// rebound to 127.0.0.1 (DNS rebinding) sends that name, and is refused.
class AnyMethod : public CivetHandler {
 public:
  explicit AnyMethod(bool loopback) : loopback_(loopback) {}

  bool handleGet(CivetServer*, mg_connection* c) override { return Serve(c); }
  bool handlePost(CivetServer*, mg_connection* c) override { return Serve(c); }
  bool handlePut(CivetServer*, mg_connection* c) override { return Serve(c); }
  bool handleDelete(CivetServer*, mg_connection* c) override {
    return Serve(c);
  }
  bool handlePatch(CivetServer*, mg_connection* c) override { return Serve(c); }
  bool handleHead(CivetServer*, mg_connection* c) override { return Serve(c); }
  bool handleOptions(CivetServer*, mg_connection* c) override {
    return Serve(c);
  }

 private:
  bool Serve(mg_connection* conn) {
    const mg_request_info* info = mg_get_request_info(conn);
    // HEAD is GET without the body.
    const bool head = absl::string_view(info->request_method) == "HEAD";
    const char* path = info->local_uri_raw;
    const char* query = info->query_string;
    const char* host = mg_get_header(conn, "Host");
    if (loopback_ && host != nullptr && !IsLoopback(host)) {
      Send(conn,
           ErrorReply(absl::PermissionDeniedError(absl::StrCat(
               "Host: delayd listens on loopback and answers only requests "
               "for localhost or a loopback address, not ",
               host))),
           head);
      return true;
    }
    Send(conn,
         Reply(head ? "GET" : info->request_method, path != nullptr ? path : "",
               query != nullptr ? query : "", conn),
         head);
    return true;
  }
  virtual HttpReply Reply(absl::string_view method, absl::string_view path,
                          absl::string_view query, mg_connection* conn) = 0;

  const bool loopback_;
};

class MetricsHandler : public AnyMethod {
 public:
  MetricsHandler(bool loopback, Metrics* metrics)
      : AnyMethod(loopback), metrics_(metrics) {}

 private:
  HttpReply Reply(absl::string_view method, absl::string_view path,
                  absl::string_view, mg_connection*) override {
    if (path != "/metrics") return NoRoute(method, path);
    if (method != "GET") return MethodNotAllowed(method, path, "GET");
    HttpReply reply;
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = metrics_->Scrape();
    return reply;
  }
  Metrics* const metrics_;
};

class HealthHandler : public AnyMethod {
 public:
  HealthHandler(bool loopback, const JsonApi* api)
      : AnyMethod(loopback), api_(api) {}

 private:
  HttpReply Reply(absl::string_view method, absl::string_view path,
                  absl::string_view, mg_connection*) override {
    if (path != "/healthz") return NoRoute(method, path);
    if (method != "GET") return MethodNotAllowed(method, path, "GET");
    HttpReply reply;
    reply.content_type = "text/plain; charset=utf-8";
    reply.code = api_->serving() ? 200 : 503;
    reply.body = api_->serving() ? "SERVING\n" : "NOT_SERVING\n";
    return reply;
  }
  const JsonApi* const api_;
};

class ApiHandler : public AnyMethod {
 public:
  ApiHandler(bool loopback, const JsonApi* api)
      : AnyMethod(loopback), api_(api) {}

 private:
  HttpReply Reply(absl::string_view method, absl::string_view path,
                  absl::string_view query, mg_connection* conn) override {
    std::optional<std::string> body = ReadBody(conn);
    if (!body.has_value()) {
      return ErrorReply(413, "PAYLOAD_TOO_LARGE",
                        absl::StrCat("body: must be at most ",
                                     JsonApi::kMaxBodyBytes, " bytes"));
    }
    const char* csrf = mg_get_header(conn, "X-CSRF-Token");
    HttpRequest request;
    request.method = method;
    request.path = path;
    request.query = query;
    request.body = *body;
    request.from_browser = mg_get_header(conn, "Origin") != nullptr ||
                           mg_get_header(conn, "Sec-Fetch-Site") != nullptr;
    request.csrf_token = csrf != nullptr ? csrf : "";
    if (const char* authorization = mg_get_header(conn, "Authorization");
        authorization != nullptr) {
      request.authorization = authorization;
    }
    return api_->Handle(request);
  }
  const JsonApi* const api_;
};

// "/": the console's page, with the CSRF token in it; "/console/<name>":
// its other files; anything else: 404.
class ConsoleHandler : public AnyMethod {
 public:
  ConsoleHandler(bool loopback, const JsonApi* api)
      : AnyMethod(loopback),
        index_(absl::StrReplaceAll(FindEmbeddedFile("index.html")->bytes,
                                   {{"{{CSRF_TOKEN}}", api->csrf_token()}})) {}

 private:
  HttpReply Reply(absl::string_view method, absl::string_view path,
                  absl::string_view, mg_connection*) override {
    HttpReply reply;
    absl::string_view name = path;
    if (path == "/" || path == "/index.html") {
      reply.body = index_;
      name = "index.html";
    } else if (absl::ConsumePrefix(&name, "/console/") &&
               name != "index.html" && FindEmbeddedFile(name) != nullptr) {
      reply.body = std::string(FindEmbeddedFile(name)->bytes);
    } else {
      return NoRoute(method, path);
    }
    if (method != "GET") return MethodNotAllowed(method, path, "GET");
    reply.content_type = ContentTypeOf(name);
    return reply;
  }

  static std::string ContentTypeOf(absl::string_view name) {
    if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
    if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
    if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
    return "application/octet-stream";
  }

  const std::string index_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& listen, Metrics* metrics, JsonApi* api) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  const std::vector<std::string> options = {
      "listening_ports", listen, "num_threads", absl::StrCat(kThreads),
      // A request that has not arrived whole in this time is dropped.
      "request_timeout_ms", "30000",
      // Paths reach the handlers as sent: JsonApi splits them, then decodes
      // topic and id (a decoded %00 would end CivetWeb's C string, and %2F
      // would split an id).
      "decode_url", "no"};
  try {
    // CivetWeb reports a bind failure by throwing from the constructor.
    server->civet_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "--http-listen: cannot serve HTTP on ", listen, ": ", e.what()));
  }
  const auto add = [&](const char* uri, std::unique_ptr<CivetHandler> h) {
    server->civet_->addHandler(uri, h.get());
    server->handlers_.push_back(std::move(h));
  };
  const bool loopback = IsLoopback(listen);
  add("/metrics", std::make_unique<MetricsHandler>(loopback, metrics));
  add("/healthz", std::make_unique<HealthHandler>(loopback, api));
  add(std::string(JsonApi::kPrefix).c_str(),
      std::make_unique<ApiHandler>(loopback, api));
  add("/", std::make_unique<ConsoleHandler>(loopback, api));
  const std::vector<int> ports = server->civet_->getListeningPorts();
  server->port_ = ports.empty() ? 0 : ports.front();
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (civet_ != nullptr) civet_->close();
}

}  // namespace delayd::server
