#include "server/config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9400",
          "Prometheus /metrics listen address host:port (port 0: any free)");
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

// One of delayd's flags as --help lists it: its value's form and its range
// ("" when the type says it all).
struct FlagDoc {
  absl::string_view name;
  absl::string_view value_name;
  absl::string_view range;
};

// delayd's flags by purpose, in --help's order. Every ABSL_FLAG above is
// here, and only these can be set (not Abseil's own, such as --flagfile).
struct FlagGroup {
  absl::string_view title;
  std::vector<FlagDoc> flags;
};

const std::vector<FlagGroup>& FlagGroups() {
  static const auto* const groups = new std::vector<FlagGroup>{
      {"Configuration", {{"config", "PATH", ""}}},
      {"Network",
       {{"listen", "HOST:PORT", ""}, {"metrics_listen", "HOST:PORT", ""}}},
      {"Storage",
       {{"data_dir", "DIR", ""},
        {"sync", "always|none", ""},
        {"retention", "DURATION", "0 (off) to 8760h"}}},
      {"Timing",
       {{"memory_horizon", "DURATION", "0 (off), or at least 1s"},
        {"shutdown_grace", "DURATION", "at least 0"}}},
      {"Limits on requests",
       {{"max_topic_bytes", "N", "at least 1"},
        {"max_id_bytes", "N", ""},
        {"max_payload_bytes", "N", ""},
        {"max_schedule_ahead", "DURATION", "more than 0"},
        {"max_batch", "N", "at least 1"},
        {"max_in_flight", "N", "at least 1"},
        {"max_page_size", "N", "at least 1"}}},
  };
  return *groups;
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
      std::string line =
          absl::StrCat("--", Dashed(doc.name), "=", doc.value_name,
                       "  (default: ", fallback.empty() ? "none" : fallback);
      if (!doc.range.empty()) absl::StrAppend(&line, "; range: ", doc.range);
      absl::StrAppend(&out, Wrap(absl::StrCat(line, ")"), "  "),
                      Wrap(flag->Help(), "      "));
    }
  }
  return out;
}

absl::StatusOr<Config> ConfigFromSettings(
    const std::vector<std::string>& settings) {
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
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
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
  Config config;
  config.listen = absl::GetFlag(FLAGS_listen);
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
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
  for (const auto& [flag, value] :
       {std::pair{"--max_topic_bytes", limits.max_topic_bytes},
        std::pair{"--max_batch", limits.max_batch},
        std::pair{"--max_in_flight", size_t{limits.max_in_flight}},
        std::pair{"--max_page_size", size_t{limits.max_page_size}}}) {
    if (value == 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": must be >= 1"));
    }
  }
  if (limits.max_schedule_ahead <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_schedule_ahead: must be > 0");
  }
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
  if (config.shutdown_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--shutdown_grace: must be >= 0");
  }
  if (config.memory_horizon != absl::ZeroDuration() &&
      config.memory_horizon < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory_horizon: must be 0 (off) or at least 1s, got ",
                     absl::FormatDuration(config.memory_horizon)));
  }
  if (config.retention < absl::ZeroDuration() ||
      config.retention > Retention::kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("--retention: must be between 0 (off) and ",
                     absl::FormatDuration(Retention::kMax), " (365 days), got ",
                     absl::FormatDuration(config.retention)));
  }
  return config;
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
