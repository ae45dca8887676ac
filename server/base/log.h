// Minimal logging to stderr: one line per event, prefixed with the UTC time
// and a level. Thread-safe (one fprintf per line). Debian 12's Abseil has no
// absl/log; this is all delayd needs.
#ifndef DELAYD_SERVER_BASE_LOG_H_
#define DELAYD_SERVER_BASE_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace delayd::server {

template <typename... Args>
void Log(const char* level, const absl::FormatSpec<Args...>& format,
         const Args&... args) {
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   " ", level, " ", absl::StrFormat(format, args...), "\n");
  std::fputs(line.c_str(), stderr);
}

#define DELAYD_LOG_INFO(...) ::delayd::server::Log("INFO", __VA_ARGS__)
#define DELAYD_LOG_WARN(...) ::delayd::server::Log("WARN", __VA_ARGS__)
#define DELAYD_LOG_ERROR(...) ::delayd::server::Log("ERROR", __VA_ARGS__)

}  // namespace delayd::server

#endif  // DELAYD_SERVER_BASE_LOG_H_
