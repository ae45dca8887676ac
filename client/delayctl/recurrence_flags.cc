#include "client/delayctl/recurrence_flags.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/delayctl/format.h"
#include "client/delayctl/job_text.h"

namespace delayd::delayctl {
namespace {

// The value of enum flag `flag`, matched against name(1) ... name(max); the
// enum's values other than UNSPECIFIED are 1 to max.
template <typename Enum>
absl::StatusOr<Enum> EnumFlag(const Args& a, const std::string& flag, int max,
                              std::string (*name)(Enum)) {
  const std::string text = a.Get(flag, "");
  std::vector<std::string> names;
  for (int i = 1; i <= max; ++i) {
    const Enum value = static_cast<Enum>(i);
    if (name(value) == text) return value;
    names.push_back(name(value));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": '", text, "' is not one of ", absl::StrJoin(names, ", ")));
}

absl::Status CronFlags(const Args& a, v1::CronSchedule& cron) {
  if (a.Has("anchor")) {
    return absl::InvalidArgumentError("--anchor: only with --every");
  }
  cron.set_expression(a.Get("cron", ""));
  cron.set_time_zone(a.Get("tz", ""));
  cron.set_dialect(v1::CRON_DIALECT_QUARTZ);
  if (a.Has("dialect")) {
    absl::StatusOr<v1::CronDialect> dialect =
        EnumFlag(a, "dialect", v1::CronDialect_MAX, &DialectName);
    if (!dialect.ok()) return dialect.status();
    cron.set_dialect(*dialect);
  }
  return absl::OkStatus();
}

absl::Status EveryFlags(const Args& a, absl::Time now,
                        v1::IntervalSchedule& every) {
  for (const char* flag : {"dialect", "tz"}) {
    if (a.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": only with --cron"));
    }
  }
  absl::StatusOr<absl::Duration> interval =
      ParseDuration(a.Get("every", ""), "--every");
  if (!interval.ok()) return interval.status();
  *every.mutable_interval() = ToProtoSaturated(*interval);
  if (a.Has("anchor")) {
    absl::StatusOr<absl::Time> anchor =
        ParseTimeOrDelay(a.Get("anchor", ""), "--anchor", now);
    if (!anchor.ok()) return anchor.status();
    *every.mutable_anchor() = ToProtoSaturated(*anchor);
  }
  return absl::OkStatus();
}

// --max-occurrences, --jitter, --misfire, --overlap: absent ones leave
// their fields unset, the server's defaults.
absl::Status PolicyFlagValues(const Args& a, v1::Recurrence& r) {
  if (a.Has("max-occurrences")) {
    uint64_t max = 0;
    const std::string text = a.Get("max-occurrences", "");
    if (!absl::SimpleAtoi(text, &max)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-occurrences: '", text, "' is not a non-negative integer"));
    }
    r.set_max_occurrences(max);
  }
  if (a.Has("jitter")) {
    absl::StatusOr<absl::Duration> jitter =
        ParseDuration(a.Get("jitter", ""), "--jitter");
    if (!jitter.ok()) return jitter.status();
    *r.mutable_jitter() = ToProtoSaturated(*jitter);
  }
  if (a.Has("misfire")) {
    absl::StatusOr<v1::MisfirePolicy> misfire =
        EnumFlag(a, "misfire", v1::MisfirePolicy_MAX, &MisfireName);
    if (!misfire.ok()) return misfire.status();
    r.set_misfire(*misfire);
  }
  if (a.Has("overlap")) {
    absl::StatusOr<v1::OverlapPolicy> overlap =
        EnumFlag(a, "overlap", v1::OverlapPolicy_MAX, &OverlapName);
    if (!overlap.ok()) return overlap.status();
    r.set_overlap(*overlap);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<FlagSpec> ScheduleFlags() {
  return {
      {"cron", "EXPR", "a cron expression"},
      {"dialect", "quartz|unix", "the expression's dialect (quartz)"},
      {"tz", "ZONE", "an IANA time zone, e.g. Europe/Berlin (UTC)"},
      {"every", "DURATION", "a fixed interval instead, e.g. 5s, 1h"},
      {"anchor", "TIME", "where --every counts from (--start or now)"},
      {"start", "TIME", "no occurrence before TIME (or a delay)"},
      {"end", "TIME", "no occurrence after TIME (or a delay)"},
  };
}

std::vector<FlagSpec> PolicyFlags() {
  return {
      {"max-occurrences", "N", "end after N occurrences (0: no limit)"},
      {"jitter", "DURATION",
       "fire each occurrence up to this much late, 0-1h (0)"},
      {"misfire", "fire-once|skip|fire-all",
       "occurrences missed while down or paused (fire-once)"},
      {"overlap", "skip|buffer-one|allow",
       "an occurrence due while the last is live (skip)"},
  };
}

bool IsRecurring(const Args& a) { return a.Has("cron") || a.Has("every"); }

std::string RecurringFlag(const Args& a) {
  return a.Has("cron") ? "--cron" : "--every";
}

absl::StatusOr<v1::Recurrence> RecurrenceFromFlags(const Args& a,
                                                   absl::Time now) {
  if (a.Has("cron") == a.Has("every")) {
    return absl::InvalidArgumentError("give one of --cron EXPR, --every D");
  }
  v1::Recurrence r;
  absl::Status s = a.Has("cron") ? CronFlags(a, *r.mutable_cron())
                                 : EveryFlags(a, now, *r.mutable_every());
  if (!s.ok()) return s;
  for (const auto& [flag, field] :
       {std::pair{"start", &v1::Recurrence::mutable_start_at},
        std::pair{"end", &v1::Recurrence::mutable_end_at}}) {
    if (!a.Has(flag)) continue;
    absl::StatusOr<absl::Time> t =
        ParseTimeOrDelay(a.Get(flag, ""), absl::StrCat("--", flag), now);
    if (!t.ok()) return t.status();
    *(r.*field)() = ToProtoSaturated(*t);
  }
  if (s = PolicyFlagValues(a, r); !s.ok()) return s;
  return r;
}

absl::StatusOr<std::optional<v1::Recurrence>> OptionalRecurrence(
    const Args& a, absl::Time now) {
  if (IsRecurring(a)) return RecurrenceFromFlags(a, now);
  for (const std::vector<FlagSpec>& flags : {ScheduleFlags(), PolicyFlags()}) {
    for (const FlagSpec& f : flags) {
      if (a.Has(f.name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", f.name,
            ": only for a recurring job (with --cron or --every)"));
      }
    }
  }
  return std::nullopt;
}

}  // namespace delayd::delayctl
