#include "client/delayctl/format.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "delayd/proto_time.h"

namespace delayd::delayctl {
namespace {

// True when `s` is valid UTF-8 without control characters other than tab.
bool IsPrintableUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
    } else if ((c & 0xe0) == 0xc0 && c >= 0xc2) {
      extra = 1;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
    } else if ((c & 0xf8) == 0xf0 && c <= 0xf4) {
      extra = 3;
    } else {
      return false;
    }
    if (extra > 0 && i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += 1 + extra;
  }
  return true;
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(const std::string& text,
                                             const std::string& what) {
  std::string rest = text;
  absl::Duration total = absl::ZeroDuration();
  // absl::ParseDuration knows no days; take a leading "<n>d" ourselves.
  if (size_t d = rest.find('d'); d != std::string::npos && d > 0) {
    int64_t days = 0;
    if (absl::SimpleAtoi(rest.substr(0, d), &days) && days >= 0) {
      total = absl::Hours(24 * days);
      rest = rest.substr(d + 1);
      if (rest.empty()) return total;
    }
  }
  absl::Duration parsed;
  if (rest == "0" || rest == "now") {
    parsed = absl::ZeroDuration();
  } else if (!absl::ParseDuration(rest, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text,
                     "' is not a duration (e.g. 30s, 1h30m, 250ms, 2d12h)"));
  }
  total += parsed;
  if (total < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": must not be negative, got '", text, "'"));
  }
  return total;
}

absl::StatusOr<When> ParseWhen(const std::string& text,
                               const std::string& what) {
  When when;
  std::string error;
  if (text.find('T') != std::string::npos ||
      (text.size() > 4 && text[4] == '-')) {
    if (!absl::ParseTime(absl::RFC3339_full, text, &when.at, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": '", text,
          "' is not an RFC 3339 time (e.g. 2026-11-22T06:30:00Z): ", error));
    }
    when.absolute = true;
    return when;
  }
  absl::StatusOr<absl::Duration> delay = ParseDuration(text, what);
  if (!delay.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", text,
        "' is neither a delay (30m, 1h30m, now) nor an RFC 3339 time "
        "(2026-11-22T06:30:00Z)"));
  }
  when.delay = *delay;
  return when;
}

absl::StatusOr<absl::Time> ParseTimeOrDelay(const std::string& text,
                                            const std::string& what,
                                            absl::Time now) {
  absl::StatusOr<When> when = ParseWhen(text, what);
  if (!when.ok()) return when.status();
  return when->absolute ? when->at : now + when->delay;
}

google::protobuf::Duration ToProtoSaturated(absl::Duration d) {
  return ToProto(absl::Nanoseconds(absl::ToInt64Nanoseconds(d)));
}

google::protobuf::Timestamp ToProtoSaturated(absl::Time t) {
  return ToProto(absl::FromUnixNanos(absl::ToUnixNanos(t)));
}

std::string HumanDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = -d;
  if (d < absl::Seconds(1)) {
    return absl::StrCat(absl::ToInt64Milliseconds(d), "ms");
  }
  if (d < absl::Seconds(10)) {
    // Tenths matter for short waits: "2.5s".
    const int64_t tenths = absl::ToInt64Milliseconds(d) / 100;
    return tenths % 10 == 0 ? absl::StrCat(tenths / 10, "s")
                            : absl::StrCat(tenths / 10, ".", tenths % 10, "s");
  }
  int64_t seconds = absl::ToInt64Seconds(d);
  const struct {
    int64_t size;
    const char* name;
  } kUnits[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  std::string out;
  int shown = 0;
  for (const auto& unit : kUnits) {
    const int64_t n = seconds / unit.size;
    if (shown > 0 || n > 0) {
      if (n > 0) absl::StrAppend(&out, n, unit.name);
      seconds -= n * unit.size;
      if (++shown == 2) break;
    }
  }
  return out;
}

std::string AbsoluteTime(absl::Time t, bool millis) {
  return absl::FormatTime(
      millis ? "%Y-%m-%d %H:%M:%E3SZ" : "%Y-%m-%d %H:%M:%SZ", t,
      absl::UTCTimeZone());
}

std::string RelativeTime(absl::Time t, absl::Time now, bool millis) {
  const absl::Duration d = t - now;
  std::string relative;
  if (absl::AbsDuration(d) < absl::Milliseconds(1)) {
    relative = "now";
  } else if (d > absl::ZeroDuration()) {
    relative = absl::StrCat("in ", HumanDuration(d));
  } else {
    relative = absl::StrCat(HumanDuration(d), " ago");
  }
  return absl::StrCat(relative, " (", AbsoluteTime(t, millis), ")");
}

std::string PayloadPreview(const std::string& payload, size_t max_chars) {
  if (payload.empty()) return "(empty)";
  std::string shown;
  if (IsPrintableUtf8(payload)) {
    shown = absl::StrCat("\"", absl::Utf8SafeCEscape(payload), "\"");
  } else {
    shown = absl::StrCat("hex:", absl::BytesToHexString(payload));
  }
  if (shown.size() > max_chars) {
    shown.resize(max_chars);
    absl::StrAppend(&shown, "... (", payload.size(), " bytes)");
  }
  return shown;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) {
        line.append(widths[c] - row[c].size() + 2, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace delayd::delayctl
