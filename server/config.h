// Config: every setting of the delayd server, with its default, and how it is
// read. Precedence, lowest first: built-in defaults, a config file
// (--config=PATH or DELAYD_CONFIG: one `name = value` per line, '#'
// comments), DELAYD_* environment variables (DELAYD_DATA_DIR=... sets
// --data-dir), the command line. Flag names take '-' or '_' alike.
//
// A Config is a plain value; it is built once at startup and then read-only.
#ifndef DELAYD_SERVER_CONFIG_H_
#define DELAYD_SERVER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/jobs/limits.h"

namespace delayd::server {

enum class SyncMode {
  kAlways,  // fsync the write-ahead log before replying OK (default)
  kNone,    // leave flushing to the OS: a machine crash may lose recent writes
};

// TLS on the gRPC port (docs/security.md). Files are PEM; gRPC re-reads
// them every reload_interval and uses them once they change, without
// dropping connections.
struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  // Set: mutual TLS, clients must present a certificate signed by these.
  std::string client_ca_file;
  absl::Duration reload_interval = absl::Seconds(10);

  bool enabled() const { return !cert_file.empty(); }
};

struct Config {
  // gRPC listen address, host:port; port 0 picks a free port.
  std::string listen = "127.0.0.1:7400";
  // Where RocksDB keeps its files; created if missing.
  std::string data_dir = "./data";
  // The HTTP server's address (/metrics, /healthz, the JSON API), host:port;
  // port 0 picks a free port. --metrics-listen is its former name.
  std::string http_listen = "127.0.0.1:9400";
  SyncMode sync = SyncMode::kAlways;
  // How long SIGTERM waits for in-progress calls before cancelling them.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Timers in memory only for jobs due within this; zero: for all.
  absl::Duration memory_horizon = absl::ZeroDuration();
  // How long acked (DONE) and canceled (CANCELED) jobs are kept, from the
  // moment they finished, before they are deleted; 0: deleted at once.
  // At most Retention::kMax (365 days).
  absl::Duration retention = absl::ZeroDuration();
  Limits limits;
  TlsConfig tls;
  // Principals and grants; empty: every call is allowed (loopback only,
  // unless insecure).
  std::string auth_file;
  // Serve non-loopback addresses without TLS or auth (logged at start).
  bool insecure = false;
};

// Parses argv (after applying the config file and DELAYD_* variables from
// `environ`). On --help (or -h, --helpfull...) prints HelpText(), on
// --version "delayd " + Version(), to stdout, and exits 0. Returns
// INVALID_ARGUMENT for an unknown flag, a bad or out-of-range value, naming
// the flag.
absl::StatusOr<Config> ParseConfig(int argc, char** argv);

// Sets delayd's flags from `settings` (MergeSettings' output: "--name=value"
// or "--name" "value", '_' in names), then reads and checks them all. Sets
// the process's flags: tests keep them with absl::FlagSaver.
absl::StatusOr<Config> ConfigFromSettings(
    const std::vector<std::string>& settings);

// Whether a listen address reaches only this machine: 127.0.0.0/8,
// localhost, [::1], or a unix socket. "0.0.0.0:7400", "[::]:7400",
// ":7400" and any other host are not.
bool IsLoopback(absl::string_view address);

// Secure by default: a non-loopback --listen needs TLS and an auth file,
// and a non-loopback --http-listen is refused (the HTTP port has neither),
// unless config.insecure. Also: --tls-cert and --tls-key go together, and
// --tls-client-ca needs them. INVALID_ARGUMENT naming what is missing.
absl::Status CheckSecurity(const Config& config);

// "0.1.0", with " (commit <12 hex digits>)" when the build knew its git
// commit.
std::string Version();

// --help: the flags grouped by purpose, each with its default and range.
std::string HelpText();

// The arguments ParseConfig hands to the flag parser, in precedence order:
// the config file's settings, then one per DELAYD_NAME variable of `env`
// (entries "KEY=VALUE"; a DELAYD_ variable that names no flag is ignored
// with a warning), then `args` (argv without argv[0]); each as
// --name=value with '-' in names turned into '_'. The config file is named by
// the last --config in args, else DELAYD_CONFIG. Exposed for tests.
absl::StatusOr<std::vector<std::string>> MergeSettings(
    const std::vector<std::string>& args, const std::vector<std::string>& env);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CONFIG_H_
