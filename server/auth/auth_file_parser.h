// The grammar of the auth file (its format is documented in auth_config.h):
// lines to principals, each line checked as it comes, the first fault
// refused with its line number. AuthConfig::Parse builds its lookups over
// what this returns; nothing else calls it.
#ifndef DELAYD_SERVER_AUTH_AUTH_FILE_PARSER_H_
#define DELAYD_SERVER_AUTH_AUTH_FILE_PARSER_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/auth/auth_config.h"

namespace delayd::server::auth {

// The principals of `text` in the file's order, or INVALID_ARGUMENT "auth
// file line N: <what is wrong>". A token is never echoed in a message.
absl::StatusOr<std::vector<Principal>> ParseAuthFile(std::string_view text);

}  // namespace delayd::server::auth

#endif  // DELAYD_SERVER_AUTH_AUTH_FILE_PARSER_H_
