// The auth file: delayd's principals (who a caller is, by bearer token or
// mTLS identity) and their grants (which permissions on which topics).
// AuthConfig parses the file once; its lookups then answer per call.
//
// The format, one directive a line:
//
//   # delayd auth file.
//   principal orders-service        # starts the block of one principal
//     token sha256:9f86d081...0a08  # 64 hex digits in a real file
//     identity orders.svc.internal  # a SAN (DNS, URI, email, IP) or the CN
//     grant schedule,cancel,read orders.*
//     grant consume orders.*
//   principal ops
//     identity CN of the ops team   # the rest of the line, spaces and all
//     grant admin *
//
//   principal NAME      Starts a principal; the directives below it, up to
//                       the next `principal`, are its own. NAME: 1-64 bytes
//                       of [A-Za-z0-9._:@-], unique in the file.
//   token sha256:HEX    A bearer token the principal holds, as its SHA-256:
//                       exactly 64 hex digits (either case; kept lower case).
//                       The file never holds a token itself: write
//                       `printf %s "$TOKEN" | sha256sum`'s digits.
//   identity TEXT       An mTLS identity: the rest of the line, trimmed,
//                       1-1024 bytes, compared byte for byte with a client
//                       certificate's SANs and CN.
//   quota schedules_per_second RATE [burst N]
//                       At most RATE jobs scheduled per second on average
//                       (Schedule, ScheduleBatch), N at once (default RATE);
//                       1-1000000000 each.
//   quota pending PATTERN N
//                       At most N jobs pending (scheduled, ready or in
//                       flight) in the topics PATTERN matches, counted over
//                       everyone's jobs; 0-1000000000000. One per pattern.
//   quota pending_bytes PATTERN N
//                       At most N bytes of payload in the jobs pending in
//                       the topics PATTERN matches, counted as `pending`
//                       counts jobs; 0-1000000000000000. One per pattern.
//   quota subscriptions N
//                       At most N Subscribe streams open at once;
//                       0-1000000.
//   grant PERMS PATTERN PERMS: a comma-separated list of schedule, cancel,
//                       read, consume, admin (no spaces). PATTERN: 1-128
//                       bytes of a topic's alphabet [A-Za-z0-9._:-] and `*`,
//                       which matches any run of characters, also none; a
//                       run of stars is kept as one. Grants add up.
//
// A principal needs a token or an identity (or several of each); one with
// no grant authenticates and is denied everything. A token hash or an
// identity appears once in the whole file. `#` at the start of a word (the
// line's or after a space or tab) starts a comment; blank lines are
// ignored; indentation is free; words are separated by spaces and tabs;
// CRLF line ends are accepted. A line is at most 4096 bytes, valid UTF-8 and
// free of NUL; Load reads at most 4 MiB. Directives, permission names and
// the `sha256:` prefix are lower case.
//
// Thread-safe: a parsed AuthConfig is immutable.
#ifndef DELAYD_SERVER_AUTH_AUTH_CONFIG_H_
#define DELAYD_SERVER_AUTH_AUTH_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "server/auth/topic_pattern.h"

namespace delayd::server::auth {

// The limits of the file (see above).
inline constexpr size_t kMaxFileBytes = size_t{4} << 20;
inline constexpr size_t kMaxLineBytes = 4096;
inline constexpr size_t kMaxNameBytes = 64;
inline constexpr size_t kMaxIdentityBytes = 1024;
inline constexpr size_t kMaxPatternBytes = 128;

// What a grant lets a principal do on its topics; the RPCs each covers.
enum class Permission : uint32_t {
  kSchedule = 1,  // Schedule, ScheduleBatch, Reschedule, PauseJob, ResumeJob
  kCancel = 2,    // Cancel
  kRead = 4,      // GetJob, ListJobs, GetStats (limited to granted topics)
  kConsume = 8,   // Subscribe, Ack, Nack, ExtendLease
  // CancelByPrefix, Redrive; implies every other permission on its topics.
  kAdmin = 16,
};

// "schedule", "cancel", "read", "consume", "admin" (as the file spells
// them); "unknown" for a value outside the enum.
std::string_view PermissionName(Permission p);

struct Grant {
  // Topic glob: '*' matches any run of characters (also none); all else is
  // literal.
  std::string pattern;
  uint32_t permissions = 0;  // bits of Permission
};

// Limits on what one principal may use (`quota` lines). Unset: no limit.
struct Quotas {
  // Jobs scheduled (Schedule, ScheduleBatch) per second, refilled evenly,
  // with room for `burst` at once. 0: no limit.
  int64_t schedules_per_second = 0;
  int64_t burst = 0;
  // A limit on what is pending (scheduled, ready or in flight) in the
  // topics that match `pattern`, whoever scheduled it.
  struct Pending {
    std::string pattern;
    int64_t limit = 0;
  };
  // Jobs pending.
  std::vector<Pending> pending;
  // Bytes of payload pending.
  std::vector<Pending> pending_bytes;
  // Open Subscribe streams at once. -1: no limit.
  int64_t subscriptions = -1;
};

struct Principal {
  std::string name;
  // Lowercase hex SHA-256 of each bearer token.
  std::vector<std::string> token_hashes;
  // mTLS identities: a certificate SAN or CN, exact match.
  std::vector<std::string> identities;
  std::vector<Grant> grants;
  Quotas quotas;

  // Whether some grant with `p` (or admin) has a pattern matching `topic`.
  bool Allows(Permission p, std::string_view topic) const;
  // Whether `p` (or admin) is granted on every topic: a grant whose pattern
  // is "*" (or only stars, in a Principal not from Parse).
  bool AllowsEverywhere(Permission p) const;
};

// Lowercase hex SHA-256 of `text` (64 characters).
std::string Sha256Hex(std::string_view text);

// The parsed auth file: immutable, cheap lookups. Copyable/movable.
class AuthConfig {
 public:
  // An empty config: no principal; every lookup finds none.
  AuthConfig() = default;

  // Parses the text format above. On any error returns INVALID_ARGUMENT
  // "auth file line N: <what is wrong>" (N 1-based) and nothing else. A
  // token is never echoed in a message.
  static absl::StatusOr<AuthConfig> Parse(std::string_view text);

  // Reads and parses the file at `path`. A file that cannot be read gives
  // the code of its errno (NOT_FOUND, PERMISSION_DENIED, ...), one over
  // kMaxFileBytes INVALID_ARGUMENT; those messages name the path and the
  // limit. Parse's errors come back prefixed with "<path>: ".
  static absl::StatusOr<AuthConfig> Load(const std::string& path);

  // The principal holding bearer token `token` (looked up by its SHA-256),
  // or nullptr; nullptr for an empty token. The pointer lives as long as
  // this config.
  const Principal* FindByToken(std::string_view token) const;
  // The principal with mTLS identity `identity` (exact match), or nullptr.
  const Principal* FindByIdentity(std::string_view identity) const;

  // In the file's order.
  const std::vector<Principal>& principals() const { return principals_; }

 private:
  std::vector<Principal> principals_;
  // Lookups: hex hash / identity -> index into principals_ (indices, not
  // pointers, so that copies stay valid).
  absl::flat_hash_map<std::string, size_t> by_token_hash_;
  absl::flat_hash_map<std::string, size_t> by_identity_;
};

}  // namespace delayd::server::auth

#endif  // DELAYD_SERVER_AUTH_AUTH_CONFIG_H_
