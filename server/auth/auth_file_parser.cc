#include "server/auth/auth_file_parser.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace delayd::server::auth {
namespace {

// Debian 12's Abseil has its own string_view type; the API takes
// std::string_view.
absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

// The permission the file spells `name`, if any.
std::optional<Permission> PermissionNamed(absl::string_view name) {
  for (const Permission p :
       {Permission::kSchedule, Permission::kCancel, Permission::kRead,
        Permission::kConsume, Permission::kAdmin}) {
    if (AsAbsl(PermissionName(p)) == name) return p;
  }
  return std::nullopt;
}

constexpr absl::string_view kBlanks = " \t";
constexpr absl::string_view kTokenPrefix = "sha256:";
constexpr size_t kSha256HexDigits = 64;

constexpr absl::string_view kKnownPermissions =
    "schedule, cancel, read, consume, admin";
constexpr absl::string_view kKnownDirectives =
    "principal, token, identity, grant, quota";
constexpr absl::string_view kKnownQuotas =
    "schedules_per_second, pending, pending_bytes, subscriptions";

bool IsTopicChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

bool IsNameChar(char c) { return IsTopicChar(c) || c == '@'; }

// `text` quoted for a message: control characters and stray bytes escaped.
std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::Utf8SafeCHexEscape(text), "\"");
}

// One byte, quoted for a message; a non-ASCII one as \xNN (alone, it is
// not a character).
std::string QuoteByte(char c) {
  return absl::StrCat("'", absl::CHexEscape(absl::string_view(&c, 1)), "'");
}

absl::string_view TrimBlanks(absl::string_view s) {
  const size_t begin = s.find_first_not_of(kBlanks);
  if (begin == absl::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kBlanks) - begin + 1);
}

// `line` up to its comment: a '#' that starts a word, so that an identity
// may hold one inside.
absl::string_view StripComment(absl::string_view line) {
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' &&
        (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

// The offset of the first byte of `s` that does not start a well-formed
// UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF), or npos.
size_t InvalidUtf8At(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t follow;  // continuation bytes; the first one's range is [lo, hi]
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      follow = 1;
    } else if (c == 0xE0) {
      follow = 2;
      lo = 0xA0;
    } else if (c == 0xED) {
      follow = 2;
      hi = 0x9F;
    } else if (c >= 0xE1 && c <= 0xEF) {
      follow = 2;
    } else if (c == 0xF0) {
      follow = 3;
      lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      follow = 3;
    } else if (c == 0xF4) {
      follow = 3;
      hi = 0x8F;
    } else {
      return i;
    }
    if (s.size() - i <= follow) return i;
    for (size_t k = 1; k <= follow; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += follow + 1;
  }
  return absl::string_view::npos;
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("auth file line ", line, ": ", what));
}

// One Parse: the principals so far, and the line where each name, token
// hash and identity was given (for the duplicate messages).
class Parser {
 public:
  absl::Status Line(int number, absl::string_view line);
  // Checks the last principal; call after the last line.
  absl::Status Finish() { return CheckLastPrincipal(); }

  std::vector<Principal> TakePrincipals() { return std::move(principals_); }

 private:
  struct Seen {
    size_t principal;  // index into principals_
    int line;
  };

  absl::Status CheckLastPrincipal() const;
  absl::Status StartPrincipal(absl::string_view name);
  absl::Status AddToken(absl::string_view token);
  absl::Status AddIdentity(absl::string_view identity);
  absl::Status AddGrant(absl::string_view permissions,
                        absl::string_view pattern);
  absl::Status AddQuota(const std::vector<absl::string_view>& words);
  // A topic pattern of a grant or quota (`what`), runs of stars made one.
  absl::StatusOr<std::string> Pattern(absl::string_view what,
                                      absl::string_view pattern) const;
  // `text` as an integer in [min, max], for `what`.
  absl::StatusOr<int64_t> Number(absl::string_view what, absl::string_view text,
                                 int64_t min, int64_t max) const;
  // `value` (a token hash or identity, of `what`) once in the file.
  absl::Status CheckUnique(absl::flat_hash_map<std::string, Seen>& seen,
                           absl::string_view what, const std::string& value);
  absl::Status Error(absl::string_view what) const {
    return LineError(line_, what);
  }

  int line_ = 0;
  std::vector<Principal> principals_;
  std::vector<int> principal_lines_;  // parallel to principals_
  absl::flat_hash_map<std::string, int> name_lines_;
  absl::flat_hash_map<std::string, Seen> token_hashes_;
  absl::flat_hash_map<std::string, Seen> identities_;
};

absl::Status Parser::Line(int number, absl::string_view line) {
  line_ = number;
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  if (line.size() > kMaxLineBytes) {
    return Error(absl::StrCat("the line is ", line.size(),
                              " bytes, over the limit of ", kMaxLineBytes));
  }
  if (line.find('\0') != absl::string_view::npos) {
    return Error("the line holds a NUL byte");
  }
  if (const size_t at = InvalidUtf8At(line); at != absl::string_view::npos) {
    return Error(
        absl::StrCat("the line is not valid UTF-8 (at byte ", at + 1, ")"));
  }
  const absl::string_view content = TrimBlanks(StripComment(line));
  if (content.empty()) return absl::OkStatus();
  const std::vector<absl::string_view> words =
      absl::StrSplit(content, absl::ByAnyChar(kBlanks), absl::SkipEmpty());
  const absl::string_view directive = words[0];
  const size_t args = words.size() - 1;
  const bool known = directive == "principal" || directive == "token" ||
                     directive == "identity" || directive == "grant" ||
                     directive == "quota";
  if (!known) {
    return Error(absl::StrCat("unknown directive ", Quote(directive),
                              " (known: ", kKnownDirectives, ")"));
  }
  if (directive == "principal") {
    if (args != 1) {
      return Error(
          absl::StrCat("principal takes 1 argument (a name), got ", args));
    }
    return StartPrincipal(words[1]);
  }
  if (principals_.empty()) {
    return Error(absl::StrCat(directive,
                              " before any principal: start a block with "
                              "`principal NAME`"));
  }
  if (directive == "token") {
    if (args != 1) {
      return Error(absl::StrCat(
          "token takes 1 argument (sha256:<64 hex digits>), got ", args));
    }
    return AddToken(words[1]);
  }
  if (directive == "identity") {
    // The rest of the line: a CN may hold spaces.
    return AddIdentity(TrimBlanks(content.substr(directive.size())));
  }
  if (directive == "quota") return AddQuota(words);
  if (args != 2) {
    return Error(absl::StrCat(
        "grant takes 2 arguments (permissions and a topic pattern), got ",
        args));
  }
  return AddGrant(words[1], words[2]);
}

absl::Status Parser::CheckLastPrincipal() const {
  if (principals_.empty()) return absl::OkStatus();
  const Principal& last = principals_.back();
  if (last.token_hashes.empty() && last.identities.empty()) {
    return LineError(
        principal_lines_.back(),
        absl::StrCat("principal ", Quote(last.name),
                     " has no token and no identity: it could never "
                     "authenticate"));
  }
  return absl::OkStatus();
}

absl::Status Parser::StartPrincipal(absl::string_view name) {
  if (absl::Status s = CheckLastPrincipal(); !s.ok()) return s;
  if (name.size() > kMaxNameBytes) {
    return Error(absl::StrCat("principal name is ", name.size(),
                              " bytes, over the limit of ", kMaxNameBytes));
  }
  if (const auto bad = std::find_if_not(name.begin(), name.end(), IsNameChar);
      bad != name.end()) {
    return Error(absl::StrCat("principal name ", Quote(name), " holds ",
                              QuoteByte(*bad), ": a name is 1-", kMaxNameBytes,
                              " bytes of [A-Za-z0-9._:@-]"));
  }
  const auto [it, inserted] = name_lines_.try_emplace(name, line_);
  if (!inserted) {
    return Error(absl::StrCat("principal ", Quote(name),
                              " is already defined on line ", it->second));
  }
  Principal principal;
  principal.name = std::string(name);
  principals_.push_back(std::move(principal));
  principal_lines_.push_back(line_);
  return absl::OkStatus();
}

absl::Status Parser::AddToken(absl::string_view token) {
  // Never echo the argument: it may be a real token.
  if (!absl::StartsWith(token, kTokenPrefix)) {
    return Error(
        "token is not sha256:<64 hex digits>; the file never holds a token "
        "itself: store its SHA-256 (printf %s \"$TOKEN\" | sha256sum) as "
        "sha256:<digits>");
  }
  const absl::string_view hex = token.substr(kTokenPrefix.size());
  const bool all_hex = std::all_of(hex.begin(), hex.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
  if (hex.size() != kSha256HexDigits || !all_hex) {
    return Error(absl::StrCat("token after sha256: must be exactly ",
                              kSha256HexDigits, " hex digits; it has ",
                              hex.size(), " characters",
                              all_hex ? "" : ", not all hex digits"));
  }
  std::string hash = absl::AsciiStrToLower(hex);
  if (absl::Status s = CheckUnique(token_hashes_, "token", hash); !s.ok()) {
    return s;
  }
  principals_.back().token_hashes.push_back(std::move(hash));
  return absl::OkStatus();
}

absl::Status Parser::AddIdentity(absl::string_view identity) {
  if (identity.empty()) {
    return Error(
        "identity is empty: expected a certificate's SAN or CN after it");
  }
  if (identity.size() > kMaxIdentityBytes) {
    return Error(absl::StrCat("identity is ", identity.size(),
                              " bytes, over the limit of ", kMaxIdentityBytes));
  }
  std::string value(identity);
  if (absl::Status s = CheckUnique(identities_, "identity", value); !s.ok()) {
    return s;
  }
  principals_.back().identities.push_back(std::move(value));
  return absl::OkStatus();
}

absl::Status Parser::AddGrant(absl::string_view permissions,
                              absl::string_view pattern) {
  Grant grant;
  const std::vector<absl::string_view> names = absl::StrSplit(permissions, ',');
  if (std::all_of(names.begin(), names.end(),
                  [](absl::string_view n) { return n.empty(); })) {
    return Error(absl::StrCat(
        "grant has an empty permission list (known: ", kKnownPermissions, ")"));
  }
  for (const absl::string_view name : names) {
    if (name.empty()) {
      return Error(absl::StrCat("permission list ", Quote(permissions),
                                " has an empty entry (a stray comma)"));
    }
    const std::optional<Permission> permission = PermissionNamed(name);
    if (!permission.has_value()) {
      return Error(absl::StrCat("unknown permission ", Quote(name),
                                " (known: ", kKnownPermissions, ")"));
    }
    grant.permissions |= static_cast<uint32_t>(*permission);
  }
  absl::StatusOr<std::string> parsed = Pattern("grant", pattern);
  if (!parsed.ok()) return parsed.status();
  grant.pattern = *std::move(parsed);
  principals_.back().grants.push_back(std::move(grant));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Parser::Pattern(absl::string_view what,
                                            absl::string_view pattern) const {
  if (pattern.empty()) {
    return Error(absl::StrCat(what, " has an empty topic pattern"));
  }
  if (pattern.size() > kMaxPatternBytes) {
    return Error(absl::StrCat(what, " pattern is ", pattern.size(),
                              " bytes, over the limit of ", kMaxPatternBytes));
  }
  std::string out;
  for (const char c : pattern) {
    if (c == '*') {
      if (!absl::EndsWith(out, "*")) out.push_back(c);
      continue;
    }
    if (!IsTopicChar(c)) {
      return Error(absl::StrCat(
          what, " pattern ", Quote(pattern), " holds ", QuoteByte(c),
          ": a pattern is a topic's characters [A-Za-z0-9._:-] and '*'"));
    }
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<int64_t> Parser::Number(absl::string_view what,
                                       absl::string_view text, int64_t min,
                                       int64_t max) const {
  int64_t value = 0;
  const bool digits =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits || !absl::SimpleAtoi(text, &value) || value < min ||
      value > max) {
    return Error(absl::StrCat(what, " must be a whole number from ", min,
                              " to ", max, ", got ", Quote(text)));
  }
  return value;
}

absl::Status Parser::AddQuota(const std::vector<absl::string_view>& words) {
  Quotas& quotas = principals_.back().quotas;
  if (words.size() < 2) {
    return Error(
        absl::StrCat("quota takes a kind (", kKnownQuotas, ") and its values"));
  }
  const absl::string_view kind = words[1];
  const size_t args = words.size() - 2;
  if (kind == "schedules_per_second") {
    if (args != 1 && !(args == 3 && words[3] == "burst")) {
      return Error("quota schedules_per_second takes RATE, or RATE burst N");
    }
    if (quotas.schedules_per_second != 0) {
      return Error("quota schedules_per_second is given twice");
    }
    absl::StatusOr<int64_t> rate =
        Number("schedules_per_second", words[2], 1, 1'000'000'000);
    if (!rate.ok()) return rate.status();
    absl::StatusOr<int64_t> burst =
        args == 3 ? Number("burst", words[4], 1, 1'000'000'000) : *rate;
    if (!burst.ok()) return burst.status();
    quotas.schedules_per_second = *rate;
    quotas.burst = *burst;
    return absl::OkStatus();
  }
  if (kind == "pending" || kind == "pending_bytes") {
    const std::string what = absl::StrCat("quota ", kind);
    if (args != 2) return Error(absl::StrCat(what, " takes PATTERN N"));
    absl::StatusOr<std::string> pattern = Pattern(what, words[2]);
    if (!pattern.ok()) return pattern.status();
    std::vector<Quotas::Pending>& list =
        kind == "pending" ? quotas.pending : quotas.pending_bytes;
    for (const Quotas::Pending& p : list) {
      if (p.pattern == *pattern) {
        return Error(
            absl::StrCat(what, " ", Quote(*pattern), " is given twice"));
      }
    }
    absl::StatusOr<int64_t> max =
        Number(what, words[3], 0,
               kind == "pending" ? 1'000'000'000'000 : 1'000'000'000'000'000);
    if (!max.ok()) return max.status();
    list.push_back({*std::move(pattern), *max});
    return absl::OkStatus();
  }
  if (kind == "subscriptions") {
    if (args != 1) return Error("quota subscriptions takes N");
    if (quotas.subscriptions >= 0) {
      return Error("quota subscriptions is given twice");
    }
    absl::StatusOr<int64_t> max =
        Number("quota subscriptions", words[2], 0, 1'000'000);
    if (!max.ok()) return max.status();
    quotas.subscriptions = *max;
    return absl::OkStatus();
  }
  return Error(absl::StrCat("unknown quota ", Quote(kind),
                            " (known: ", kKnownQuotas, ")"));
}

absl::Status Parser::CheckUnique(absl::flat_hash_map<std::string, Seen>& seen,
                                 absl::string_view what,
                                 const std::string& value) {
  const size_t current = principals_.size() - 1;
  const auto [it, inserted] =
      seen.try_emplace(value, Seen{.principal = current, .line = line_});
  if (inserted) return absl::OkStatus();
  const Seen& first = it->second;
  if (first.principal == current) {
    return Error(absl::StrCat(
        "the same ", what, " is listed twice (also on line ", first.line, ")"));
  }
  return Error(absl::StrCat("the same ", what, " is already held by principal ",
                            Quote(principals_[first.principal].name), " (line ",
                            first.line, ")"));
}

}  // namespace

absl::StatusOr<std::vector<Principal>> ParseAuthFile(std::string_view text) {
  Parser parser;
  int number = 0;
  for (const absl::string_view line : absl::StrSplit(AsAbsl(text), '\n')) {
    if (absl::Status s = parser.Line(++number, line); !s.ok()) return s;
  }
  if (absl::Status s = parser.Finish(); !s.ok()) return s;
  return parser.TakePrincipals();
}

}  // namespace delayd::server::auth
