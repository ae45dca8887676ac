#include "server/auth/auth_config.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/auth/auth_file_parser.h"

namespace delayd::server::auth {
namespace {

// Debian 12's Abseil has its own string_view type; the API takes
// std::string_view.
absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

// The permissions as the file spells them.
struct PermissionEntry {
  std::string_view name;
  Permission permission;
};
constexpr std::array<PermissionEntry, 5> kPermissions = {{
    {"schedule", Permission::kSchedule},
    {"cancel", Permission::kCancel},
    {"read", Permission::kRead},
    {"consume", Permission::kConsume},
    {"admin", Permission::kAdmin},
}};
// The contents of the file at `path`, at most kMaxFileBytes.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "auth file " + path);
  const absl::Status too_big = absl::InvalidArgumentError(
      absl::StrFormat("auth file %s: larger than the limit of 4 MiB (%d bytes)",
                      path, kMaxFileBytes));
  std::string text;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
      close(fd);
      return too_big;
    }
    text.reserve(static_cast<size_t>(st.st_size));
  }
  // Read until the end, or one byte past the limit (a file that grows, or
  // one that is not regular).
  char buffer[64 * 1024];
  while (text.size() <= kMaxFileBytes) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, "auth file " + path);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  if (text.size() > kMaxFileBytes) return too_big;
  return text;
}

}  // namespace

std::string_view PermissionName(Permission p) {
  for (const PermissionEntry& entry : kPermissions) {
    if (entry.permission == p) return entry.name;
  }
  return "unknown";
}

bool Principal::Allows(Permission p, std::string_view topic) const {
  const uint32_t wanted =
      static_cast<uint32_t>(p) | static_cast<uint32_t>(Permission::kAdmin);
  return std::any_of(grants.begin(), grants.end(), [&](const Grant& g) {
    return (g.permissions & wanted) != 0 && TopicMatches(g.pattern, topic);
  });
}

bool Principal::AllowsEverywhere(Permission p) const {
  const uint32_t wanted =
      static_cast<uint32_t>(p) | static_cast<uint32_t>(Permission::kAdmin);
  return std::any_of(grants.begin(), grants.end(), [&](const Grant& g) {
    return (g.permissions & wanted) != 0 && !g.pattern.empty() &&
           g.pattern.find_first_not_of('*') == std::string::npos;
  });
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

absl::StatusOr<AuthConfig> AuthConfig::Parse(std::string_view text) {
  absl::StatusOr<std::vector<Principal>> principals = ParseAuthFile(text);
  if (!principals.ok()) return principals.status();
  AuthConfig config;
  config.principals_ = *std::move(principals);
  for (size_t i = 0; i < config.principals_.size(); ++i) {
    for (const std::string& hash : config.principals_[i].token_hashes) {
      config.by_token_hash_.emplace(hash, i);
    }
    for (const std::string& identity : config.principals_[i].identities) {
      config.by_identity_.emplace(identity, i);
    }
  }
  return config;
}

absl::StatusOr<AuthConfig> AuthConfig::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<AuthConfig> config = Parse(*text);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

const Principal* AuthConfig::FindByToken(std::string_view token) const {
  if (token.empty()) return nullptr;
  // Looked up by hash: what the map compares is not the secret itself.
  const auto it = by_token_hash_.find(Sha256Hex(token));
  return it == by_token_hash_.end() ? nullptr : &principals_[it->second];
}

const Principal* AuthConfig::FindByIdentity(std::string_view identity) const {
  const auto it = by_identity_.find(AsAbsl(identity));
  return it == by_identity_.end() ? nullptr : &principals_[it->second];
}

}  // namespace delayd::server::auth
