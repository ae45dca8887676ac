#include "server/recurring/cron.h"

#include <array>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace delayd::server::recurring {
namespace {

constexpr std::array<const char*, 12> kMonthNames = {
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
    "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 7> kDayNames = {"SUN", "MON", "TUE", "WED",
                                                  "THU", "FRI", "SAT"};

// One cron field's domain.
struct Spec {
  const char* name;
  int min;
  int max;
  // Names of min, min+1, ...; empty when the field has none.
  const char* const* names = nullptr;
  int name_count = 0;
  int name_base = 0;  // the value of names[0]
};

// One whitespace-separated field of the expression.
struct Token {
  absl::string_view text;
  size_t position;  // 1-based, in the whole expression
};

// Parses one field; errors name the expression's field, the position and
// the cron field.
class FieldParser {
 public:
  FieldParser(absl::string_view api_field, const Token& token, const Spec& spec)
      : api_field_(api_field), token_(token), spec_(spec) {}

  absl::Status Error(size_t offset, absl::string_view expected) const {
    const absl::string_view rest =
        token_.text.substr(std::min(offset, token_.text.size()));
    return absl::InvalidArgumentError(absl::StrCat(
        api_field_, ": at position ", token_.position + offset, " (",
        spec_.name, " field \"", token_.text, "\"): expected ", expected,
        rest.empty() ? ", got the end of the field"
                     : absl::StrCat(", got \"", rest, "\"")));
  }

  std::string Range() const {
    std::string out = absl::StrCat(spec_.min, "-", spec_.max);
    if (spec_.name_count > 0) {
      absl::StrAppend(&out, " or ", spec_.names[0], "-",
                      spec_.names[spec_.name_count - 1]);
    }
    return out;
  }

  // The decimal digits at `*p`, advancing `*p` past them; stops early
  // once the value passes 100000 (no field takes that much).
  int64_t Digits(size_t* p) const {
    const absl::string_view t = token_.text;
    int64_t v = 0;
    while (*p < t.size() &&
           absl::ascii_isdigit(static_cast<unsigned char>(t[*p]))) {
      v = v * 10 + (t[*p] - '0');
      if (v > 100000) break;
      ++*p;
    }
    return v;
  }

  // A number or a name at `*pos`, in [min, max]; advances `*pos`.
  absl::StatusOr<int> Value(size_t* pos) const {
    const absl::string_view t = token_.text;
    size_t p = *pos;
    if (p < t.size() && absl::ascii_isdigit(static_cast<unsigned char>(t[p]))) {
      const int64_t v = Digits(&p);
      if (v < spec_.min || v > spec_.max) {
        return Error(*pos, absl::StrCat("a value ", Range()));
      }
      *pos = p;
      return static_cast<int>(v);
    }
    if (spec_.name_count > 0 && p + 3 <= t.size()) {
      const std::string word = absl::AsciiStrToUpper(t.substr(p, 3));
      for (int i = 0; i < spec_.name_count; ++i) {
        if (word == spec_.names[i]) {
          *pos = p + 3;
          return spec_.name_base + i;
        }
      }
    }
    return Error(*pos, absl::StrCat("a value ", Range()));
  }

  // A step count after '/' at `*pos`: 1 up to the field's span.
  absl::StatusOr<int> Step(size_t* pos) const {
    size_t p = *pos;
    const int64_t v = Digits(&p);
    const int span = spec_.max - spec_.min + 1;
    if (p == *pos || v < 1 || v > span) {
      return Error(*pos, absl::StrCat("a step 1-", span));
    }
    *pos = p;
    return static_cast<int>(v);
  }

  // The plain syntax: `*`, or a list of `a`, `a-b`, `*/n`, `a/n`, `a-b/n`.
  // Sets values[v] for each value; a range may wrap past max to min.
  absl::Status Plain(std::vector<bool>* values) const {
    const absl::string_view t = token_.text;
    values->assign(spec_.max + 1, false);
    size_t pos = 0;
    while (true) {
      int from = spec_.min;
      int to = spec_.max;
      int step = 1;
      if (pos < t.size() && t[pos] == '*') {
        ++pos;
      } else {
        absl::StatusOr<int> a = Value(&pos);
        if (!a.ok()) return a.status();
        from = *a;
        to = *a;
        if (pos < t.size() && t[pos] == '-') {
          ++pos;
          absl::StatusOr<int> b = Value(&pos);
          if (!b.ok()) return b.status();
          to = *b;
        } else if (pos < t.size() && t[pos] == '/') {
          to = spec_.max;  // `a/n`: from a to the end
        }
      }
      if (pos < t.size() && t[pos] == '/') {
        ++pos;
        absl::StatusOr<int> n = Step(&pos);
        if (!n.ok()) return n.status();
        step = *n;
      }
      // Walk from `from` to `to`, wrapping past max when to < from.
      const int span = spec_.max - spec_.min + 1;
      const int count = (to - from + span) % span + 1;
      for (int k = 0; k < count; k += step) {
        (*values)[spec_.min + (from - spec_.min + k) % span] = true;
      }
      if (pos == t.size()) return absl::OkStatus();
      if (t[pos] != ',') {
        return Error(pos, "',', '-', '/' or the end of the field");
      }
      ++pos;
    }
  }

 private:
  absl::string_view api_field_;
  Token token_;
  Spec spec_;
};

// A whole field that is `n` followed by `suffix` (e.g. "15W", "5L"); the
// number must be 1-3 digits. Returns n, or -1 when the field is not of
// that form.
int NumberWithSuffix(absl::string_view t, absl::string_view suffix) {
  if (t.size() < suffix.size() + 1 || t.size() > suffix.size() + 3) return -1;
  if (!absl::EndsWith(t, suffix)) return -1;
  int v = 0;
  for (char c : t.substr(0, t.size() - suffix.size())) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

int DaysInMonth(absl::CivilDay d) {
  const absl::CivilMonth m(d);
  return static_cast<int>(absl::CivilDay(m + 1) - absl::CivilDay(m));
}

// 0 = Sunday.
int WeekdayOf(absl::CivilDay d) {
  return (static_cast<int>(absl::GetWeekday(d)) + 1) % 7;
}

template <size_t N>
void CopyBits(const std::vector<bool>& values, int offset,
              std::bitset<N>* bits) {
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v]) bits->set(v - offset);
  }
}

}  // namespace

absl::StatusOr<CronExpression> CronExpression::Parse(absl::string_view field,
                                                     absl::string_view text,
                                                     CronDialect dialect) {
  const bool quartz = dialect == CronDialect::kQuartz;
  std::string expanded(absl::StripAsciiWhitespace(text));
  if (!quartz && !expanded.empty() && expanded[0] == '@') {
    static constexpr std::pair<const char*, const char*> kMacros[] = {
        {"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
        {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
        {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}};
    bool found = false;
    for (const auto& [name, body] : kMacros) {
      if (absl::AsciiStrToLower(expanded) == name) {
        expanded = body;
        found = true;
        break;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat(field,
                       ": at position 1: expected one of @yearly @annually "
                       "@monthly @weekly @daily @midnight @hourly, or 5 or 6 "
                       "fields, got \"",
                       expanded, "\""));
    }
  }
  // Split into fields, keeping each one's position in `text`.
  std::vector<Token> tokens;
  {
    const absl::string_view all = expanded;
    // Positions refer to the caller's text when no macro was expanded.
    const size_t lead = text.find_first_not_of(" \t\n\r\f\v");
    const size_t base = (lead == absl::string_view::npos ||
                         expanded != absl::StripAsciiWhitespace(text))
                            ? 1
                            : lead + 1;
    size_t i = 0;
    while (i < all.size()) {
      while (i < all.size() &&
             absl::ascii_isspace(static_cast<unsigned char>(all[i])))
        ++i;
      if (i == all.size()) break;
      size_t j = i;
      while (j < all.size() &&
             !absl::ascii_isspace(static_cast<unsigned char>(all[j])))
        ++j;
      tokens.push_back({all.substr(i, j - i), base + i});
      i = j;
    }
  }
  const size_t min_fields = quartz ? 6 : 5;
  const size_t max_fields = quartz ? 7 : 6;
  if (tokens.size() < min_fields || tokens.size() > max_fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": expected ",
        quartz ? "6 or 7 fields (sec min hour day-of-month month "
                 "day-of-week [year])"
               : "5 fields (min hour day-of-month month day-of-week), 6 "
                 "with leading seconds, or an @ macro",
        ", got ", tokens.size()));
  }
  // Unix without seconds: fire at second 0.
  const bool has_seconds = quartz || tokens.size() == 6;
  const size_t first = has_seconds ? 0 : 1;
  auto token = [&](size_t index) -> const Token& {
    return tokens[index - first];
  };
  const bool has_year = quartz && tokens.size() == 7;

  const Spec kSecond{"second", 0, 59};
  const Spec kMinute{"minute", 0, 59};
  const Spec kHour{"hour", 0, 23};
  const Spec kDom{"day-of-month", 1, 31};
  const Spec kMonth{"month", 1, 12, kMonthNames.data(), 12, 1};
  const Spec kDow = quartz ? Spec{"day-of-week", 1, 7, kDayNames.data(), 7, 1}
                           : Spec{"day-of-week", 0, 7, kDayNames.data(), 7, 0};
  const Spec kYear{"year", kFirstYear, kLastYear};

  CronExpression e;
  std::vector<bool> values;
  if (has_seconds) {
    FieldParser p(field, token(0), kSecond);
    if (absl::Status s = p.Plain(&values); !s.ok()) return s;
    CopyBits(values, 0, &e.seconds_);
  } else {
    e.seconds_.set(0);
  }
  {
    FieldParser p(field, token(1), kMinute);
    if (absl::Status s = p.Plain(&values); !s.ok()) return s;
    CopyBits(values, 0, &e.minutes_);
  }
  {
    FieldParser p(field, token(2), kHour);
    if (absl::Status s = p.Plain(&values); !s.ok()) return s;
    CopyBits(values, 0, &e.hours_);
  }
  {
    FieldParser p(field, token(4), kMonth);
    if (absl::Status s = p.Plain(&values); !s.ok()) return s;
    CopyBits(values, 0, &e.months_);
  }
  if (has_year) {
    FieldParser p(field, token(6), kYear);
    if (absl::Status s = p.Plain(&values); !s.ok()) return s;
    CopyBits(values, kFirstYear, &e.years_);
  } else {
    e.years_.set();
  }

  // Day of month.
  const Token& dom = token(3);
  const Token& dow = token(5);
  const bool dom_any = dom.text == "?";
  const bool dow_any = dow.text == "?";
  if (!quartz && (dom_any || dow_any)) {
    const Token& t = dom_any ? dom : dow;
    return FieldParser(field, t, dom_any ? kDom : kDow)
        .Error(0, "a value, '*' or a list ('?' is Quartz only)");
  }
  if (quartz && dom_any == dow_any) {
    return FieldParser(field, dow, kDow)
        .Error(0, dom_any ? "a value in one of the two day fields ('?' in "
                            "both day-of-month and day-of-week)"
                          : "'?' in day-of-month or day-of-week (Quartz "
                            "takes exactly one of them)");
  }
  {
    FieldParser p(field, dom, kDom);
    const std::string upper = absl::AsciiStrToUpper(dom.text);
    if (dom_any) {
      e.days_of_month_.set();
    } else if (upper == "L" || upper == "LW") {
      e.last_day_ = true;
      e.nearest_weekday_ = upper == "LW";
    } else if (absl::StartsWith(upper, "L-")) {
      size_t pos = 2;
      int v = 0;
      while (pos < upper.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(upper[pos])) &&
             v <= 30) {
        v = v * 10 + (upper[pos] - '0');
        ++pos;
      }
      if (pos == 2 || pos != upper.size() || v > 30) {
        return p.Error(2, "a number of days 0-30 after \"L-\"");
      }
      e.last_day_ = true;
      e.last_day_offset_ = v;
    } else if (const int w = NumberWithSuffix(upper, "W"); w >= 0) {
      if (w < 1 || w > 31) return p.Error(0, "a day 1-31 before 'W'");
      e.nearest_weekday_ = true;
      e.nearest_weekday_day_ = w;
    } else {
      if (absl::Status s = p.Plain(&values); !s.ok()) return s;
      CopyBits(values, 0, &e.days_of_month_);
    }
  }
  // Day of week (0 = Sunday inside).
  {
    FieldParser p(field, dow, kDow);
    const std::string upper = absl::AsciiStrToUpper(dow.text);
    // A day number or name of this dialect, as 0-6.
    auto day = [&](absl::string_view t, size_t offset) -> absl::StatusOr<int> {
      FieldParser sub(field, Token{t, dow.position + offset}, kDow);
      size_t pos = 0;
      absl::StatusOr<int> v = sub.Value(&pos);
      if (!v.ok()) return v.status();
      if (pos != t.size()) return sub.Error(pos, "a single day");
      return quartz ? *v - 1 : *v % 7;
    };
    if (dow_any) {
      e.days_of_week_.set();
    } else if (upper == "L") {
      e.days_of_week_.set(6);  // the last day of the week: Saturday
    } else if (upper.size() >= 2 && upper.back() == 'L') {
      absl::StatusOr<int> d = day(dow.text.substr(0, dow.text.size() - 1), 0);
      if (!d.ok()) return d.status();
      e.last_weekday_of_month_ = *d;
    } else if (const size_t hash = upper.find('#'); hash != std::string::npos) {
      absl::StatusOr<int> d = day(dow.text.substr(0, hash), 0);
      if (!d.ok()) return d.status();
      const absl::string_view k = dow.text.substr(hash + 1);
      if (k.size() != 1 || k[0] < '1' || k[0] > '5') {
        return p.Error(hash + 1, "an occurrence 1-5 after '#'");
      }
      e.nth_weekday_ = *d;
      e.nth_ = k[0] - '0';
    } else {
      if (absl::Status s = p.Plain(&values); !s.ok()) return s;
      for (size_t v = 0; v < values.size(); ++v) {
        if (values[v]) e.days_of_week_.set(quartz ? v - 1 : v % 7);
      }
    }
  }
  if (quartz) {
    e.dom_restricted_ = !dom_any;
    e.dow_restricted_ = !dow_any;
  } else {
    // Vixie cron: a field starting with '*' does not restrict.
    e.dom_restricted_ = dom.text[0] != '*';
    e.dow_restricted_ = dow.text[0] != '*';
    e.either_day_ = e.dom_restricted_ && e.dow_restricted_;
  }
  std::vector<absl::string_view> parts;
  for (const Token& t : tokens) parts.push_back(t.text);
  e.text_ = absl::StrJoin(parts, " ");
  return e;
}

bool CronExpression::DomMatches(absl::CivilDay d) const {
  const int day = d.day();
  const int last = DaysInMonth(d);
  if (nearest_weekday_) {
    // The weekday nearest the target day, never leaving the month.
    int target = last_day_ ? last : std::min(nearest_weekday_day_, last);
    const int weekday = WeekdayOf(absl::CivilDay(d.year(), d.month(), target));
    if (weekday == 6) {
      target = target > 1 ? target - 1 : target + 2;
    } else if (weekday == 0) {
      target = target < last ? target + 1 : target - 2;
    }
    return day == target;
  }
  if (last_day_) return day == last - last_day_offset_;
  return days_of_month_.test(day);
}

bool CronExpression::DowMatches(absl::CivilDay d) const {
  const int weekday = WeekdayOf(d);
  if (last_weekday_of_month_ >= 0) {
    return weekday == last_weekday_of_month_ && d.day() + 7 > DaysInMonth(d);
  }
  if (nth_weekday_ >= 0) {
    return weekday == nth_weekday_ && (d.day() - 1) / 7 + 1 == nth_;
  }
  return days_of_week_.test(weekday);
}

bool CronExpression::DayMatches(absl::CivilDay d) const {
  if (either_day_) return DomMatches(d) || DowMatches(d);
  return (!dom_restricted_ || DomMatches(d)) &&
         (!dow_restricted_ || DowMatches(d));
}

bool CronExpression::Matches(absl::CivilSecond t) const {
  if (t.year() < kFirstYear || t.year() > kLastYear) return false;
  return years_.test(t.year() - kFirstYear) && months_.test(t.month()) &&
         DayMatches(absl::CivilDay(t)) && hours_.test(t.hour()) &&
         minutes_.test(t.minute()) && seconds_.test(t.second());
}

namespace {

// The first set bit at or after `from`, or -1.
template <size_t N>
int NextBit(const std::bitset<N>& bits, int from) {
  for (int i = from; i < static_cast<int>(N); ++i) {
    if (bits.test(i)) return i;
  }
  return -1;
}

}  // namespace

std::optional<absl::CivilSecond> CronExpression::NextCivil(
    absl::CivilSecond t) const {
  absl::CivilSecond c = t + 1;
  while (c.year() <= kLastYear) {
    if (c.year() < kFirstYear) {
      c = absl::CivilSecond(kFirstYear, 1, 1, 0, 0, 0);
      continue;
    }
    if (!years_.test(c.year() - kFirstYear)) {
      const int y = NextBit(years_, c.year() - kFirstYear);
      if (y < 0) return std::nullopt;
      c = absl::CivilSecond(kFirstYear + y, 1, 1, 0, 0, 0);
      continue;
    }
    if (!months_.test(c.month())) {
      const int m = NextBit(months_, c.month());
      c = m < 0 ? absl::CivilSecond(c.year() + 1, 1, 1, 0, 0, 0)
                : absl::CivilSecond(c.year(), m, 1, 0, 0, 0);
      continue;
    }
    if (!DayMatches(absl::CivilDay(c))) {
      c = absl::CivilSecond(absl::CivilDay(c) + 1);
      continue;
    }
    if (!hours_.test(c.hour())) {
      const int h = NextBit(hours_, c.hour());
      c = h < 0 ? absl::CivilSecond(absl::CivilDay(c) + 1)
                : absl::CivilSecond(c.year(), c.month(), c.day(), h, 0, 0);
      continue;
    }
    if (!minutes_.test(c.minute())) {
      const int m = NextBit(minutes_, c.minute());
      c = m < 0
              ? absl::CivilSecond(absl::CivilHour(c) + 1)
              : absl::CivilSecond(c.year(), c.month(), c.day(), c.hour(), m, 0);
      continue;
    }
    if (!seconds_.test(c.second())) {
      const int s = NextBit(seconds_, c.second());
      c = s < 0 ? absl::CivilSecond(absl::CivilMinute(c) + 1)
                : absl::CivilSecond(c.year(), c.month(), c.day(), c.hour(),
                                    c.minute(), s);
      continue;
    }
    return c;
  }
  return std::nullopt;
}

std::optional<absl::Time> NextCronFiring(const CronExpression& expression,
                                         const absl::TimeZone& zone,
                                         absl::Time after) {
  absl::CivilSecond local = zone.At(after).cs;
  while (true) {
    const std::optional<absl::CivilSecond> c = expression.NextCivil(local);
    if (!c.has_value()) return std::nullopt;
    const absl::TimeZone::TimeInfo info = zone.At(*c);
    // UNIQUE: pre == post. SKIPPED (in a gap): the first instant after it.
    // REPEATED: the first occurrence (pre).
    const absl::Time at =
        info.kind == absl::TimeZone::TimeInfo::SKIPPED ? info.trans : info.pre;
    // A time repeated by a fall-back that `after` has passed (its first
    // occurrence is over; the second does not fire): go on.
    if (at > after) return at;
    local = *c;
  }
}

}  // namespace delayd::server::recurring
