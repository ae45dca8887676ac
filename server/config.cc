#include "server/config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/jobs/retention.h"

extern char** environ;

ABSL_FLAG(std::string, config, "",
          "config file: one `name = value` per line, '#' comments; "
          "environment variables and the command line override it");
ABSL_FLAG(std::string, listen, "127.0.0.1:7400",
          "gRPC listen address host:port (port 0: any free port)");
ABSL_FLAG(std::string, data_dir, "./data",
          "directory of the RocksDB job store (created if missing)");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:9400",
          "HTTP listen address host:port (port 0: any free port): /metrics, "
          "/healthz and the JSON API under /api/v1");
ABSL_FLAG(std::string, metrics_listen, "",
          "the former name of --http-listen, still taken");
ABSL_FLAG(std::string, sync, "always",
          "always: fsync the write-ahead log before replying OK; none: leave "
          "it to the OS");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "on SIGTERM, how long in-progress calls may take before they are "
          "cancelled");
ABSL_FLAG(absl::Duration, memory_horizon, absl::ZeroDuration(),
          "keep timers in memory only for jobs due within this much time "
          "(at least 1s); later ones stay on disk and are loaded as it "
          "advances. 0: every pending job has a timer in memory");
ABSL_FLAG(absl::Duration, retention, absl::ZeroDuration(),
          "how long acked jobs (as DONE) and canceled jobs (as CANCELED) are "
          "kept after they finished, visible to GetJob/ListJobs/GetStats and "
          "answering Cancel (ALREADY_DONE) and Schedule retries, before they "
          "are deleted; 0: delete at once; at most 8760h (365 days)");

// Security (docs/design.md, "Security").
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the gRPC port; with --tls-key, the port "
          "serves TLS only. Re-read when it changes on disk");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: clients must present a certificate signed by "
          "one of them (mutual TLS). Re-read when it changes on disk");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "how often the TLS files are checked for changes");
ABSL_FLAG(std::string, auth_file, "",
          "principals and their grants (docs/security.md); every call must "
          "then carry a bearer token or a client certificate of a principal. "
          "Re-read on SIGHUP");
ABSL_FLAG(bool, insecure, false,
          "serve a non-loopback address without TLS or an auth file (or the "
          "HTTP port on a non-loopback address, which has neither)");

// Limits on client input (DESIGN's limits table); refusals name the field
// and the limit.
ABSL_FLAG(uint32_t, max_topic_bytes, 128, "longest topic, in bytes");
ABSL_FLAG(uint32_t, max_id_bytes, 256, "longest job id, in bytes");
ABSL_FLAG(uint32_t, max_payload_bytes, 1 << 20,
          "largest job payload, in bytes (requests are capped at 16 MiB)");
ABSL_FLAG(absl::Duration, max_schedule_ahead, absl::Hours(24 * 36525),
          "how far ahead a job may be due (default 100 years)");
ABSL_FLAG(uint32_t, max_batch, 1000,
          "most requests in one ScheduleBatch, and tokens in one Ack");
ABSL_FLAG(uint32_t, max_in_flight, 10000,
          "largest Subscribe max_in_flight a subscriber may ask for");
ABSL_FLAG(uint32_t, max_page_size, 1000, "largest ListJobs page_size");

namespace delayd::server {
namespace {

constexpr absl::string_view kEnvPrefix = "DELAYD_";

// The range of a duration or size flag: [min, max], and 0 too when
// `zero_off` (0 turning the feature off). Every such flag has one, finite, so
// that arithmetic on times and sizes stays in range; checked at start,
// listed by --help.
struct DurationRange {
  absl::Duration min;
  absl::Duration max;
  bool zero_off = false;
};
struct SizeRange {
  uint32_t min;
  uint32_t max;
};

// One of delayd's flags as --help lists it: its value's form and range.
struct FlagDoc {
  absl::string_view name;
  absl::string_view value_name;
  std::optional<DurationRange> duration = std::nullopt;
  std::optional<SizeRange> size = std::nullopt;
};

// delayd's flags by purpose, in --help's order. Every ABSL_FLAG above is
// here, and only these can be set (not Abseil's own, such as --flagfile).
struct FlagGroup {
  absl::string_view title;
  std::vector<FlagDoc> flags;
};

const std::vector<FlagGroup>& FlagGroups() {
  constexpr uint32_t kMiB = 1 << 20;
  static const auto* const groups = new std::vector<FlagGroup>{
      {"Configuration", {{"config", "PATH"}}},
      {"Network",
       {{"listen", "HOST:PORT"},
        {"http_listen", "HOST:PORT"},
        {"metrics_listen", "HOST:PORT"}}},
      {"Storage",
       {{"data_dir", "DIR"},
        {"sync", "always|none"},
        {"retention", "DURATION",
         DurationRange{absl::ZeroDuration(), Retention::kMax, true}}}},
      {"Timing",
       {{"memory_horizon", "DURATION",
         DurationRange{absl::Seconds(1), absl::Hours(24 * 365), true}},
        {"shutdown_grace", "DURATION",
         DurationRange{absl::ZeroDuration(), absl::Hours(1)}}}},
      {"Limits on requests",
       {{"max_topic_bytes", "N", std::nullopt, SizeRange{1, 4096}},
        {"max_id_bytes", "N", std::nullopt, SizeRange{0, 4096}},
        {"max_payload_bytes", "N", std::nullopt, SizeRange{0, 16 * kMiB}},
        {"max_schedule_ahead", "DURATION",
         DurationRange{absl::Seconds(1), absl::Hours(24 * 36525)}},
        {"max_batch", "N", std::nullopt, SizeRange{1, 100'000}},
        {"max_in_flight", "N", std::nullopt, SizeRange{1, 1'000'000}},
        {"max_page_size", "N", std::nullopt, SizeRange{1, 100'000}}}},
      {"Security",
       {{"tls_cert", "PATH"},
        {"tls_key", "PATH"},
        {"tls_client_ca", "PATH"},
        {"tls_reload_interval", "DURATION",
         DurationRange{absl::Seconds(1), absl::Hours(24)}},
        {"auth_file", "PATH"},
        {"insecure", ""}}},
  };
  return *groups;
}

// "0 (off) or between 1s and 8760h", "between 1 and 4096"; "" without a
// range.
std::string RangeText(const FlagDoc& doc) {
  if (doc.size)
    return absl::StrCat("between ", doc.size->min, " and ", doc.size->max);
  if (!doc.duration) return "";
  const DurationRange& r = *doc.duration;
  if (r.min == absl::ZeroDuration()) {
    return absl::StrCat("between 0", r.zero_off ? " (off)" : "", " and ",
                        absl::FormatDuration(r.max));
  }
  return absl::StrCat(r.zero_off ? "0 (off) or " : "", "between ",
                      absl::FormatDuration(r.min), " and ",
                      absl::FormatDuration(r.max));
}

// The flag's current value is outside its range: the error naming both.
absl::Status CheckRange(const FlagDoc& doc) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(doc.name);
  bool in_range = true;
  if (doc.size) {
    const uint32_t v = flag->TryGet<uint32_t>().value_or(0);
    in_range = v >= doc.size->min && v <= doc.size->max;
  } else if (doc.duration) {
    const absl::Duration v =
        flag->TryGet<absl::Duration>().value_or(absl::InfiniteDuration());
    in_range = (doc.duration->zero_off && v == absl::ZeroDuration()) ||
               (v >= doc.duration->min && v <= doc.duration->max);
  }
  if (in_range) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", doc.name, ": must be ",
                                                 RangeText(doc), ", got ",
                                                 flag->CurrentValue()));
}

// The flag of delayd's named `name` ('_' form), or nullptr.
absl::CommandLineFlag* FindDelaydFlag(absl::string_view name) {
  for (const FlagGroup& group : FlagGroups()) {
    for (const FlagDoc& doc : group.flags) {
      if (doc.name == name) return absl::FindCommandLineFlag(name);
    }
  }
  return nullptr;
}

// `text` as lines of at most 79 columns, each starting with `indent`.
std::string Wrap(absl::string_view text, absl::string_view indent) {
  std::string out;
  std::string line(indent);
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > indent.size() && line.size() + 1 + word.size() > 79) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(indent);
    }
    if (line.size() > indent.size()) line += ' ';
    absl::StrAppend(&line, word);
  }
  if (line.size() > indent.size()) absl::StrAppend(&out, line, "\n");
  return out;
}

// "data_dir" -> "data-dir": flag names as the docs spell them.
std::string Dashed(absl::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return out;
}

// `args` asks for help (-h, --help, or Abseil's --helpfull and kin) or for
// the version; the flags after "--" do not count.
enum class Request { kRun, kHelp, kVersion };
Request Requested(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "-h") return Request::kHelp;
    absl::string_view name = arg;
    if (!absl::ConsumePrefix(&name, "--")) continue;
    name = name.substr(0, name.find('='));
    if (name == "version") return Request::kVersion;
    if (absl::StartsWith(name, "help")) return Request::kHelp;
  }
  return Request::kRun;
}

// "--data-dir=x" -> "--data_dir=x"; other arguments unchanged.
std::string NormalizeFlag(absl::string_view arg) {
  if (!absl::StartsWith(arg, "--") || arg == "--") return std::string(arg);
  const size_t eq = arg.find('=');
  std::string name(arg.substr(0, eq));
  for (size_t i = 2; i < name.size(); ++i) {
    if (name[i] == '-') name[i] = '_';
  }
  return eq == absl::string_view::npos ? name
                                       : absl::StrCat(name, arg.substr(eq));
}

absl::StatusOr<std::vector<std::string>> ReadConfigFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config: cannot read '", path, "'"));
  }
  std::vector<std::string> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::ConsumePrefix(&text, "--");
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--config: ", path, ":", n, ": expected `name = value`"));
    }
    out.push_back(NormalizeFlag(
        absl::StrCat("--", absl::StripAsciiWhitespace(text.substr(0, eq)), "=",
                     absl::StripAsciiWhitespace(text.substr(eq + 1)))));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MergeSettings(
    const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> from_env;
  std::string config_path;
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (!absl::StartsWith(entry, kEnvPrefix) || eq == std::string::npos) {
      continue;
    }
    std::string name = absl::AsciiStrToLower(
        entry.substr(kEnvPrefix.size(), eq - kEnvPrefix.size()));
    if (name == "config") {
      config_path = entry.substr(eq + 1);
      continue;
    }
    // Other programs' variables may share the prefix: only flags count.
    if (FindDelaydFlag(name) == nullptr) {
      std::fprintf(stderr, "delayd: ignoring %s: no flag --%s\n",
                   entry.substr(0, eq).c_str(), name.c_str());
      continue;
    }
    from_env.push_back(
        NormalizeFlag(absl::StrCat("--", name, "=", entry.substr(eq + 1))));
  }
  std::vector<std::string> from_args;
  for (const std::string& arg : args) {
    std::string flag = NormalizeFlag(arg);
    if (absl::StartsWith(flag, "--config=")) {
      config_path = flag.substr(9);
      continue;
    }
    from_args.push_back(std::move(flag));
  }
  std::vector<std::string> merged;
  if (!config_path.empty()) {
    absl::StatusOr<std::vector<std::string>> file = ReadConfigFile(config_path);
    if (!file.ok()) return file.status();
    merged = *std::move(file);
  }
  merged.insert(merged.end(), from_env.begin(), from_env.end());
  merged.insert(merged.end(), from_args.begin(), from_args.end());
  return merged;
}

std::string Version() {
  const absl::string_view commit = DELAYD_GIT_COMMIT;
  return commit.empty()
             ? DELAYD_VERSION
             : absl::StrCat(DELAYD_VERSION, " (commit ", commit, ")");
}

std::string HelpText() {
  std::string out = absl::StrCat(
      "delayd ", Version(),
      ": a delay-job service.\n\nusage: delayd [--flag=value ...]\n"
      "       delayd --help | --version\n\n");
  absl::StrAppend(
      &out,
      Wrap("Settings come from, lowest precedence first: built-in defaults, "
           "a config file (--config=PATH or DELAYD_CONFIG; `name = value` "
           "lines), DELAYD_<NAME> environment variables (e.g. "
           "DELAYD_DATA_DIR), the command line. Flag names take '-' or '_' "
           "alike (--data-dir = --data_dir). Durations are like 1500ms, 90s, "
           "1h30m.",
           ""));
  for (const FlagGroup& group : FlagGroups()) {
    absl::StrAppend(&out, "\n", group.title, ":\n");
    for (const FlagDoc& doc : group.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(doc.name);
      const std::string fallback = flag->DefaultValue();
      std::string line = absl::StrCat(
          "--", Dashed(doc.name), doc.value_name.empty() ? "" : "=",
          doc.value_name, "  (default: ", fallback.empty() ? "none" : fallback);
      if (doc.duration || doc.size) {
        absl::StrAppend(&line, "; range: ", RangeText(doc));
      }
      absl::StrAppend(&out, Wrap(absl::StrCat(line, ")"), "  "),
                      Wrap(flag->Help(), "      "));
    }
  }
  return out;
}

absl::StatusOr<Config> ConfigFromSettings(
    const std::vector<std::string>& settings) {
  absl::flat_hash_set<std::string> given;  // names of the flags set here
  for (size_t i = 0; i < settings.size(); ++i) {
    absl::string_view arg = settings[i];
    if (!absl::ConsumePrefix(&arg, "--") || arg.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", settings[i],
                       "': delayd takes flags only (see delayd --help)"));
    }
    const size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    absl::CommandLineFlag* flag = FindDelaydFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see delayd --help)"));
    }
    given.insert(name);
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      value = "true";  // --insecure alone; --insecure=false to unset
    } else if (i + 1 < settings.size()) {
      value = settings[++i];  // --name value
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": needs a value"));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": cannot read '", value, "': ", error));
    }
  }
  for (const FlagGroup& group : FlagGroups()) {
    for (const FlagDoc& doc : group.flags) {
      if (absl::Status range = CheckRange(doc); !range.ok()) return range;
    }
  }
  Config config;
  config.listen = absl::GetFlag(FLAGS_listen);
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  config.http_listen = absl::GetFlag(FLAGS_http_listen);
  if (const std::string alias = absl::GetFlag(FLAGS_metrics_listen);
      given.contains("metrics_listen")) {
    if (given.contains("http_listen") && alias != config.http_listen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-listen=", alias, " is the former name of --http-listen=",
          config.http_listen, ": give one address"));
    }
    config.http_listen = alias;
  }
  config.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  config.memory_horizon = absl::GetFlag(FLAGS_memory_horizon);
  config.retention = absl::GetFlag(FLAGS_retention);
  Limits& limits = config.limits;
  limits.max_topic_bytes = absl::GetFlag(FLAGS_max_topic_bytes);
  limits.max_id_bytes = absl::GetFlag(FLAGS_max_id_bytes);
  limits.max_payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  limits.max_schedule_ahead = absl::GetFlag(FLAGS_max_schedule_ahead);
  limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  limits.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  limits.max_page_size = absl::GetFlag(FLAGS_max_page_size);
  if (limits.default_in_flight > limits.max_in_flight) {
    limits.default_in_flight = limits.max_in_flight;
  }
  if (limits.default_page_size > limits.max_page_size) {
    limits.default_page_size = limits.max_page_size;
  }
  const std::string sync = absl::GetFlag(FLAGS_sync);
  if (sync == "always") {
    config.sync = SyncMode::kAlways;
  } else if (sync == "none") {
    config.sync = SyncMode::kNone;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync: must be 'always' or 'none', got '", sync, "'"));
  }
  config.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  config.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  config.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  config.tls.reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  config.auth_file = absl::GetFlag(FLAGS_auth_file);
  config.insecure = absl::GetFlag(FLAGS_insecure);
  if (absl::Status secure = CheckSecurity(config); !secure.ok()) return secure;
  return config;
}

bool IsLoopback(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    return true;  // a local socket: no network reaches it
  }
  const size_t colon = address.rfind(':');
  absl::string_view host =
      colon == absl::string_view::npos ? address : address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
    return host == "::1";
  }
  if (host == "localhost") return true;
  // 127.0.0.0/8: four decimal parts, the first 127.
  std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (absl::string_view part : parts) {
    if (part.empty() || part.size() > 3) return false;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
    }
  }
  return true;
}

absl::Status CheckSecurity(const Config& config) {
  const TlsConfig& tls = config.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both or neither");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS "
        "first");
  }
  if (config.insecure) return absl::OkStatus();
  if (!IsLoopback(config.listen)) {
    std::vector<std::string> missing;
    if (!tls.enabled()) missing.push_back("--tls-cert and --tls-key");
    if (config.auth_file.empty()) missing.push_back("--auth-file");
    if (!missing.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", config.listen,
          " is not a loopback address, so delayd serves it only with TLS and "
          "an auth file: missing ",
          absl::StrJoin(missing, " and "),
          " (or pass --insecure to serve it without them)"));
    }
  }
  if (!IsLoopback(config.http_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen=", config.http_listen,
        " is not a loopback address: the HTTP port (metrics, JSON API, "
        "console) has no TLS or auth, so it stays on loopback (or pass "
        "--insecure to serve it anyway)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> ParseConfig(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  switch (Requested(args)) {
    case Request::kHelp:
      std::fputs(HelpText().c_str(), stdout);
      std::exit(0);
    case Request::kVersion:
      std::printf("delayd %s\n", Version().c_str());
      std::exit(0);
    case Request::kRun:
      break;
  }
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  absl::StatusOr<std::vector<std::string>> merged = MergeSettings(args, env);
  if (!merged.ok()) return merged.status();
  return ConfigFromSettings(*merged);
}

}  // namespace delayd::server
