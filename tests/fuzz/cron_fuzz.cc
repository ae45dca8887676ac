// Fuzz target: cron expressions (server/recurring/cron.h), which any client
// sends in Schedule, Reschedule and PreviewSchedule.
//
// The input is parsed in both dialects. A refusal is INVALID_ARGUMENT
// naming the field. An expression that parses has a canonical text that
// parses to itself and to the same calendar; its next civil match after a
// few starts is later and matches; and a few successive firings in UTC and
// in Europe/Berlin (a DST zone: a gap in March, a repeat in October) are
// strictly increasing.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "server/recurring/cron.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using delayd::server::recurring::CronDialect;
using delayd::server::recurring::CronExpression;
using delayd::server::recurring::NextCronFiring;

constexpr int kFirings = 4;

const absl::TimeZone& Berlin() {
  static const absl::TimeZone* const zone = [] {
    auto* z = new absl::TimeZone;
    FUZZ_CHECK(absl::LoadTimeZone("Europe/Berlin", z));  // needs tzdata
    return z;
  }();
  return *zone;
}

void CheckFirings(const CronExpression& e, const absl::TimeZone& zone,
                  absl::Time after) {
  for (int i = 0; i < kFirings; ++i) {
    const std::optional<absl::Time> next = NextCronFiring(e, zone, after);
    if (!next.has_value()) return;
    FUZZ_CHECK(*next > after);
    after = *next;
  }
}

void Check(absl::string_view text, CronDialect dialect) {
  absl::StatusOr<CronExpression> e =
      CronExpression::Parse("expression", text, dialect);
  if (!e.ok()) {
    FUZZ_CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(e.status().message(), "expression: "));
    return;
  }
  absl::StatusOr<CronExpression> canonical =
      CronExpression::Parse("expression", e->text(), dialect);
  FUZZ_CHECK(canonical.ok());
  FUZZ_CHECK(canonical->text() == e->text());

  for (const absl::CivilSecond start :
       {absl::CivilSecond(1969, 12, 31, 23, 59, 59),
        absl::CivilSecond(2026, 2, 28, 23, 59, 59),
        absl::CivilSecond(2099, 12, 31, 23, 0, 0)}) {
    const std::optional<absl::CivilSecond> next = e->NextCivil(start);
    FUZZ_CHECK(next == canonical->NextCivil(start));
    if (!next.has_value()) continue;
    FUZZ_CHECK(*next > start);
    FUZZ_CHECK(next->year() <= 2099);
    FUZZ_CHECK(e->Matches(*next));
  }

  CheckFirings(*e, absl::UTCTimeZone(), absl::FromUnixSeconds(1767225600));
  // Just before Berlin springs forward (2026-03-29 02:00 local) and falls
  // back (2026-10-25 03:00 local).
  CheckFirings(*e, Berlin(), absl::FromUnixSeconds(1774742400));
  CheckFirings(*e, Berlin(), absl::FromUnixSeconds(1792886400));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = delayd::fuzz::AsText(data, size);
  const absl::string_view text(in.data(), in.size());
  Check(text, CronDialect::kQuartz);
  Check(text, CronDialect::kUnix);
  return 0;
}
