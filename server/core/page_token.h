// Page tokens of ListJobs: opaque to clients, they carry the last id of the
// previous page and a fingerprint of the query (topic, prefix, states, due
// range), so a token is refused when reused with another query. Pure
// functions; thread-safe.
#ifndef DELAYD_SERVER_CORE_PAGE_TOKEN_H_
#define DELAYD_SERVER_CORE_PAGE_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::server {

std::string EncodePageToken(const v1::ListJobsRequest& query,
                            const std::string& last_id);

// The last id carried by req.page_token ("" for no token). INVALID_ARGUMENT
// naming page_token when it is malformed or was made for another query.
absl::StatusOr<std::string> DecodePageToken(const v1::ListJobsRequest& req);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_PAGE_TOKEN_H_
