// Cron expressions (issue 14): the two dialects recurring jobs accept, and
// the calendar that turns one into occurrences in an IANA time zone.
//
// Dialects:
//   kQuartz  `sec min hour day-of-month month day-of-week [year]`.
//            Day-of-week 1-7 = SUN-SAT. Exactly one of the two day fields
//            is `?` (Quartz's rule). Years 1970-2099.
//   kUnix    5 fields `min hour day-of-month month day-of-week`, or 6 with
//            leading seconds. Day-of-week 0-7, 0 and 7 both Sunday. The
//            macros @yearly @annually @monthly @weekly @daily @midnight
//            @hourly. When both day fields are restricted (neither starts
//            with `*`), a day matches if either does (Vixie cron).
// Both: `*`, lists `a,b`, ranges `a-b`, steps `*/n`, `a/n` (from a to the
// field's end), `a-b/n`; names JAN-DEC and SUN-SAT in any case; in
// day-of-month `L` (last day), `L-n` (n days before it), `nW` (the weekday
// nearest day n, within the month), `LW` (the last weekday); in day-of-week
// `L` alone (the last day of the week, Saturday), `nL` (the last day n of
// the month: `5L` is the last Thursday in Quartz, the last Friday in Unix)
// and `n#k` (the k-th day n of the month, k 1-5). A range may wrap
// (`FRI-MON`, `22-2`).
//
// Every occurrence lies in 1970-2099, local time: the calendar looks no
// further (Quartz's own bound).
//
// Thread-safe: a parsed expression is immutable.
#ifndef DELAYD_SERVER_RECURRING_CRON_H_
#define DELAYD_SERVER_RECURRING_CRON_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"

namespace delayd::server::recurring {

enum class CronDialect { kQuartz, kUnix };

// The years the calendar covers, local time.
inline constexpr int kFirstYear = 1970;
inline constexpr int kLastYear = 2099;

class CronExpression {
 public:
  // Parses `text` in `dialect`. INVALID_ARGUMENT otherwise, whose message
  // starts "<field>: " and names the position in the expression (1-based
  // character), the cron field there and what was expected.
  static absl::StatusOr<CronExpression> Parse(absl::string_view field,
                                              absl::string_view text,
                                              CronDialect dialect);

  // Whether the local civil second `t` matches.
  bool Matches(absl::CivilSecond t) const;

  // The first matching civil second after `t` (strictly), in 1970-2099;
  // nullopt when there is none.
  std::optional<absl::CivilSecond> NextCivil(absl::CivilSecond t) const;

  // The expression in a canonical form, for logs and tests.
  const std::string& text() const { return text_; }

 private:
  CronExpression() = default;

  // Whether day `d` of year/month matches the two day fields.
  bool DayMatches(absl::CivilDay d) const;
  bool DomMatches(absl::CivilDay d) const;
  bool DowMatches(absl::CivilDay d) const;

  std::string text_;
  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;  // 1-31
  std::bitset<13> months_;         // 1-12
  std::bitset<7> days_of_week_;    // 0 = Sunday
  std::bitset<kLastYear - kFirstYear + 1> years_;
  // Day-of-month specials; at most one of them, alone in its field.
  bool last_day_ = false;  // L, L-n
  int last_day_offset_ = 0;
  bool nearest_weekday_ = false;  // nW, LW (with last_day_)
  int nearest_weekday_day_ = 0;
  // Day-of-week specials; at most one, alone in its field.
  int last_weekday_of_month_ = -1;  // nL: 0-6
  int nth_weekday_ = -1;            // n#k: 0-6
  int nth_ = 0;                     // k
  // Which day fields restrict (not `*` or `?`), and how they combine.
  bool dom_restricted_ = false;
  bool dow_restricted_ = false;
  bool either_day_ = false;  // Vixie: both restricted, either matches
};

// When an occurrence of a cron schedule fires, given the DST rules:
//   * a local time that occurs once fires then;
//   * a local time in a gap (spring forward) fires at the first instant
//     after the gap, and all of a gap's matching times fire as that one
//     firing;
//   * a local time that occurs twice (fall back) fires once, at its first
//     occurrence.
// Returns the first firing strictly after `after`, or nullopt when there is
// none up to the end of 2099 local time.
std::optional<absl::Time> NextCronFiring(const CronExpression& expression,
                                         const absl::TimeZone& zone,
                                         absl::Time after);

}  // namespace delayd::server::recurring

#endif  // DELAYD_SERVER_RECURRING_CRON_H_
