// Fuzz target: the server's configuration (server/config.h) — command
// line, DELAYD_* environment variables and the config file, merged by
// MergeSettings and read by ConfigFromSettings. Operator input, but an
// error must be a status, never a crash.
//
// The input, cut at NUL bytes: args NUL env NUL file. args and env are one
// entry a line; the file part, when present, is written to a temporary
// file that a last --config= names. A --config or DELAYD_CONFIG of the
// input itself is dropped: the target reads no file but its own. The merged
// settings, and the args alone, go to ConfigFromSettings (under a
// FlagSaver: it sets the process's flags); a config it returns passes
// CheckSecurity and keeps its limits in the ranges --help lists.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace server = delayd::server;

// The temporary config file, one per process, removed at exit.
const std::string& ConfigPath() {
  static const std::string* const path = [] {
    auto* p =
        new std::string((std::filesystem::temp_directory_path() /
                         absl::StrCat("delayd_config_fuzz.", getpid(), ".conf"))
                            .string());
    std::atexit([] { std::remove(ConfigPath().c_str()); });
    return p;
  }();
  return *path;
}

// What IsLoopback accepts starts as one of these.
bool LooksLocal(absl::string_view address) {
  for (const absl::string_view prefix :
       {"unix:", "unix-abstract:", "127.", "localhost", "[::1]"}) {
    if (absl::StartsWith(address, prefix)) return true;
  }
  return false;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  if (text.empty()) return lines;
  return delayd::fuzz::Split(text, '\n', SIZE_MAX);
}

// --config=..., --config ..., in any spelling of the name.
bool NamesConfigFile(const std::string& arg) {
  if (!absl::StartsWith(arg, "--")) return false;
  std::string name = arg.substr(2, arg.find('=') - 2);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name == "config";
}

void CheckConfig(const std::vector<std::string>& settings) {
  absl::FlagSaver saver;
  absl::StatusOr<server::Config> config = server::ConfigFromSettings(settings);
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(server::CheckSecurity(*config).ok());
  const server::Limits& limits = config->limits;
  FUZZ_CHECK(limits.max_topic_bytes >= 1 && limits.max_topic_bytes <= 4096);
  FUZZ_CHECK(limits.max_id_bytes <= 4096);
  FUZZ_CHECK(limits.max_payload_bytes <= (size_t{16} << 20));
  FUZZ_CHECK(limits.max_batch >= 1 && limits.max_batch <= 100'000);
  FUZZ_CHECK(limits.max_in_flight >= 1 && limits.max_in_flight <= 1'000'000);
  FUZZ_CHECK(limits.max_page_size >= 1 && limits.max_page_size <= 100'000);
  FUZZ_CHECK(limits.default_in_flight <= limits.max_in_flight);
  FUZZ_CHECK(limits.default_page_size <= limits.max_page_size);
  FUZZ_CHECK(limits.max_schedule_ahead >= absl::Seconds(1) &&
             limits.max_schedule_ahead <= absl::Hours(24 * 36525));
  FUZZ_CHECK(config->retention >= absl::ZeroDuration() &&
             config->retention <= absl::Hours(24 * 365));
  FUZZ_CHECK(config->tls.reload_interval >= absl::Seconds(1) &&
             config->tls.reload_interval <= absl::Hours(24));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts =
      delayd::fuzz::Split(delayd::fuzz::AsText(data, size), '\0', 3);
  std::vector<std::string> args;
  for (std::string& arg : Lines(parts[0])) {
    if (!NamesConfigFile(arg)) args.push_back(std::move(arg));
  }
  std::vector<std::string> env;
  if (parts.size() > 1) {
    for (std::string& entry : Lines(parts[1])) {
      const std::string name =
          absl::AsciiStrToLower(entry.substr(0, entry.find('=')));
      if (name != "delayd_config") env.push_back(std::move(entry));
    }
  }
  if (parts.size() > 2) {
    std::FILE* f = std::fopen(ConfigPath().c_str(), "wb");
    FUZZ_CHECK(f != nullptr);
    FUZZ_CHECK(std::fwrite(parts[2].data(), 1, parts[2].size(), f) ==
               parts[2].size());
    FUZZ_CHECK(std::fclose(f) == 0);
  }
  std::vector<std::string> with_file = args;
  if (parts.size() > 2) with_file.push_back("--config=" + ConfigPath());

  for (const std::string& arg : args) {
    if (server::IsLoopback(arg)) FUZZ_CHECK(LooksLocal(arg));
  }
  absl::StatusOr<std::vector<std::string>> merged =
      server::MergeSettings(with_file, env);
  if (merged.ok()) {
    CheckConfig(*merged);
  } else {
    FUZZ_CHECK(merged.status().code() == absl::StatusCode::kInvalidArgument);
  }
  CheckConfig(args);
  return 0;
}
