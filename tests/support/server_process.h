// DelaydProcess: the real `delayd` binary run as a child process for
// end-to-end tests, on free loopback ports (port 0) with a temporary data
// dir, its stderr captured in a log file in that dir.
//
// Owns the process and, unless told to keep it, the temp dir: the destructor
// kills a still-running server with SIGKILL and removes the dir.
// Not thread-safe; one test thread drives it.
#ifndef DELAYD_TESTS_SUPPORT_SERVER_PROCESS_H_
#define DELAYD_TESTS_SUPPORT_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace delayd::testing {

// Path of the delayd binary under test (baked in at build time).
std::string DelaydBinary();

// A new empty directory under the test temp dir.
std::string MakeTempDir();

// GET http://<address>/metrics (address "127.0.0.1:port", e.g. a
// DelaydProcess's http_address()); the whole HTTP response, "" on failure.
std::string ScrapeMetrics(const std::string& address);

// Sends `request` (a whole HTTP/1.0 request) to `address` and returns the
// whole response, "" on failure.
std::string HttpExchange(const std::string& address,
                         const std::string& request);

class DelaydProcess {
 public:
  // Starts delayd with `extra_args` on top of --listen / --http-listen on
  // port 0 and --data-dir under `dir` (a new temp dir when empty), and waits
  // up to `timeout` for its "listening" line and then for health SERVING
  // (recovery done).
  static absl::StatusOr<std::unique_ptr<DelaydProcess>> Start(
      std::vector<std::string> extra_args = {}, std::string dir = "",
      absl::Duration timeout = absl::Seconds(30));
  // Like Start, but returns as soon as the "listening" line is out, without
  // waiting for SERVING: recovery may still be running.
  static absl::StatusOr<std::unique_ptr<DelaydProcess>> Launch(
      std::vector<std::string> extra_args = {}, std::string dir = "",
      absl::Duration timeout = absl::Seconds(30));

  DelaydProcess(const DelaydProcess&) = delete;
  DelaydProcess& operator=(const DelaydProcess&) = delete;
  ~DelaydProcess();

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }
  const std::string& dir() const { return dir_; }
  std::string data_dir() const { return dir_ + "/data"; }
  pid_t pid() const { return pid_; }

  // Polls grpc.health.v1 until the server reports SERVING, over `channel`
  // (NewChannel() when null; a TLS server needs a channel of its own).
  absl::Status WaitServing(absl::Duration timeout,
                           std::shared_ptr<grpc::Channel> channel = nullptr);

  // A new insecure channel to the server.
  std::shared_ptr<grpc::Channel> NewChannel() const;

  // Sends `signal` (e.g. SIGTERM, SIGKILL).
  void Signal(int signal);
  // Waits up to `timeout` for the process to exit; returns its exit code,
  // or 128+N when killed by signal N, or DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(30));
  // Everything the server wrote to stderr so far.
  std::string Log() const;
  // Keep the temp dir after destruction (to restart on the same data).
  void KeepDir() { keep_dir_ = true; }

 private:
  DelaydProcess(pid_t pid, std::string dir);

  pid_t pid_;
  bool exited_ = false;
  const std::string dir_;
  bool keep_dir_ = false;
  std::string grpc_address_;
  std::string http_address_;
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_SUPPORT_SERVER_PROCESS_H_
