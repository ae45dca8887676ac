// HttpServer: delayd's one HTTP server, CivetWeb on --http-listen. It
// serves /metrics (Metrics::Scrape, the Prometheus text format), /healthz
// (200 "SERVING" once the JSON API serves, else 503), the JSON API under
// /api/v1 (JsonApi) and the web console: "/" its page (console_files.h,
// with JsonApi's CSRF token put in), "/console/<file>" its script and
// style; anything else is a JSON 404. Every reply carries a Content-
// Security-Policy that lets a page run only the console's own files. On a
// loopback address it answers only requests whose Host header names
// loopback (localhost, 127.x, ::1), so a page of another site cannot reach
// it by rebinding its own name to 127.0.0.1 (403 otherwise). Owns
// its CivetServer; borrows `metrics` and `api`, which must outlive it.
//
// Thread-safe: CivetWeb's kThreads workers run the handlers, one request
// each at a time; a call that waits (a synced write) holds its worker.
#ifndef DELAYD_SERVER_HTTP_HTTP_SERVER_H_
#define DELAYD_SERVER_HTTP_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http/json_api.h"
#include "server/metrics/metrics.h"

class CivetHandler;
class CivetServer;

namespace delayd::server {

class HttpServer {
 public:
  static constexpr int kThreads = 8;

  // Listens on `listen` (host:port; port 0 picks one). UNAVAILABLE, naming
  // --http-listen, when it cannot.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& listen, Metrics* metrics, JsonApi* api);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  // The port actually bound.
  int port() const { return port_; }

  // Stops listening and waits for the requests in progress (up to about
  // 2 s more: CivetWeb's poll quantum). Idempotent.
  void Stop();

 private:
  HttpServer() = default;

  std::vector<std::unique_ptr<CivetHandler>> handlers_;
  std::unique_ptr<CivetServer> civet_;
  int port_ = 0;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_HTTP_HTTP_SERVER_H_
