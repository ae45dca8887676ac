// RecordingServer: an in-process delayd.v1.DelayQueue and grpc.health.v1
// server on 127.0.0.1 (a free port), plain or TLS (optionally mutual), that
// records the `authorization` metadata of every call it gets: what the
// client side's tests of tokens and TLS talk to instead of a real delayd.
// GetJob, GetStats, Ack and health Check answer OK with empty replies
// (health: SERVING); Subscribe ends at once with OK — unless told to refuse.
// Thread-safe; stops in the destructor.
#ifndef DELAYD_TESTS_CLIENT_RECORDING_SERVER_H_
#define DELAYD_TESTS_CLIENT_RECORDING_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "grpcpp/server_context.h"

namespace delayd::testing {

class RecordingServer {
 public:
  struct Tls {
    std::string cert_pem;  // the server's certificate chain
    std::string key_pem;
    // Non-empty: clients must present a certificate these CAs verify.
    std::string client_ca_pem;
  };

  // Starts at once; `tls` empty: plain TCP.
  explicit RecordingServer(std::optional<Tls> tls = std::nullopt);
  RecordingServer(const RecordingServer&) = delete;
  RecordingServer& operator=(const RecordingServer&) = delete;
  ~RecordingServer();

  // "127.0.0.1:PORT".
  std::string address() const;
  int port() const { return port_; }

  // When set, calls whose `authorization` is not "Bearer <token>" are
  // refused with UNAUTHENTICATED (and still recorded).
  void RequireToken(const std::string& token);

  // Answers the next `calls` calls UNAVAILABLE (after recording them).
  void FailNext(int calls);

  // The `authorization` value of each call of `method` ("GetJob",
  // "Subscribe", "Check", ...), in the order they came; kNone for a call
  // without one.
  static constexpr char kNone[] = "(none)";
  std::vector<std::string> Seen(const std::string& method) const;

  // Records a call of `method`; the status to answer it with. For the
  // services' use.
  grpc::Status Record(const std::string& method,
                      const grpc::ServerContext& context);

 private:
  class DelayQueue;
  class Health;

  std::unique_ptr<DelayQueue> delay_queue_;
  std::unique_ptr<Health> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> seen_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> required_ ABSL_GUARDED_BY(mu_);
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_CLIENT_RECORDING_SERVER_H_
