// Fuzz target: the auth file (server/auth/auth_config.h AuthConfig::Parse)
// and topic globs (TopicMatches). The file is operator input, but a
// reload (SIGHUP) reads whatever is on disk then, and a glob runs against
// every topic a client names.
//
// The whole input is parsed as an auth file. A refusal is INVALID_ARGUMENT
// "auth file line N: ..."; a file that parses holds what the format allows
// (names, lower-case 64-digit hashes, identities, patterns, permissions;
// hashes and identities unique) and its lookups and grants agree with it.
// The input is also cut in two (at its first NUL, else in the middle) into
// a pattern and a topic for TopicMatches, compared with a plain dynamic
// programme on inputs small enough for it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "server/auth/auth_config.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace auth = delayd::server::auth;

constexpr auth::Permission kPermissions[] = {
    auth::Permission::kSchedule, auth::Permission::kCancel,
    auth::Permission::kRead, auth::Permission::kConsume,
    auth::Permission::kAdmin};
constexpr uint32_t kAllPermissions = 31;

bool IsLowerHex(std::string_view s) {
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
         c == '@' || c == '-';
}

bool IsPatternChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
         c == '-' || c == '*';
}

// TopicMatches by the textbook dynamic programme, O(|pattern| * |topic|):
// row[j] says whether the pattern so far matches topic[0, j).
bool ReferenceMatches(std::string_view pattern, std::string_view topic) {
  std::vector<char> row(topic.size() + 1, 0);
  row[0] = 1;
  for (const char p : pattern) {
    std::vector<char> next(topic.size() + 1, 0);
    if (p == '*') {
      next[0] = row[0];
      for (size_t j = 1; j <= topic.size(); ++j) {
        next[j] = row[j] || next[j - 1];
      }
    } else {
      for (size_t j = 1; j <= topic.size(); ++j) {
        next[j] = row[j - 1] && topic[j - 1] == p;
      }
    }
    row.swap(next);
  }
  return row[topic.size()] != 0;
}

void CheckTopicMatches(std::string_view in) {
  const size_t nul = in.find('\0');
  const size_t cut = nul == std::string_view::npos ? in.size() / 2 : nul;
  const std::string_view pattern = in.substr(0, cut);
  const std::string_view topic =
      in.substr(nul == std::string_view::npos ? cut : cut + 1);
  const bool matches = auth::TopicMatches(pattern, topic);
  if ((pattern.size() + 1) * (topic.size() + 1) <= (size_t{1} << 18)) {
    FUZZ_CHECK(matches == ReferenceMatches(pattern, topic));
  }
}

void CheckParsed(const auth::AuthConfig& config) {
  absl::flat_hash_set<std::string> names, hashes, identities;
  FUZZ_CHECK(config.FindByToken("") == nullptr);
  for (const auth::Principal& p : config.principals()) {
    FUZZ_CHECK(!p.name.empty() && p.name.size() <= auth::kMaxNameBytes);
    for (const char c : p.name) FUZZ_CHECK(IsNameChar(c));
    FUZZ_CHECK(names.insert(p.name).second);
    FUZZ_CHECK(!p.token_hashes.empty() || !p.identities.empty());
    for (const std::string& hash : p.token_hashes) {
      FUZZ_CHECK(hash.size() == 64 && IsLowerHex(hash));
      FUZZ_CHECK(hashes.insert(hash).second);
    }
    for (const std::string& identity : p.identities) {
      FUZZ_CHECK(!identity.empty() &&
                 identity.size() <= auth::kMaxIdentityBytes);
      FUZZ_CHECK(identities.insert(identity).second);
      FUZZ_CHECK(config.FindByIdentity(identity) == &p);
    }
    for (const auth::Grant& g : p.grants) {
      FUZZ_CHECK(!g.pattern.empty() &&
                 g.pattern.size() <= auth::kMaxPatternBytes);
      for (const char c : g.pattern) FUZZ_CHECK(IsPatternChar(c));
      FUZZ_CHECK(g.pattern.find("**") == std::string::npos);
      FUZZ_CHECK(g.permissions != 0 && (g.permissions & ~kAllPermissions) == 0);
      // The stars matching nothing: a topic the grant covers.
      std::string literal;
      for (const char c : g.pattern) {
        if (c != '*') literal += c;
      }
      FUZZ_CHECK(auth::TopicMatches(g.pattern, literal));
      for (const auth::Permission perm : kPermissions) {
        if ((g.permissions & static_cast<uint32_t>(perm)) == 0) continue;
        FUZZ_CHECK(p.Allows(perm, literal));
        if (g.pattern == "*") FUZZ_CHECK(p.AllowsEverywhere(perm));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = delayd::fuzz::AsText(data, size);
  absl::StatusOr<auth::AuthConfig> config = auth::AuthConfig::Parse(text);
  if (config.ok()) {
    CheckParsed(*config);
  } else {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(config.status().message(), "auth file line "));
  }
  CheckTopicMatches(text);
  return 0;
}
