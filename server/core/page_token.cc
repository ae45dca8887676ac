#include "server/core/page_token.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"

namespace delayd::server {
namespace {

constexpr char kVersion = 1;

uint64_t Fingerprint(const v1::ListJobsRequest& query) {
  v1::ListJobsRequest q;
  q.set_topic(query.topic());
  q.set_id_prefix(query.id_prefix());
  *q.mutable_states() = query.states();
  if (query.has_due_after()) *q.mutable_due_after() = query.due_after();
  if (query.has_due_before()) *q.mutable_due_before() = query.due_before();
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : q.SerializeAsString()) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string EncodePageToken(const v1::ListJobsRequest& query,
                            const std::string& last_id) {
  std::string raw(1 + sizeof(uint64_t), '\0');
  raw[0] = kVersion;
  const uint64_t fp = Fingerprint(query);
  std::memcpy(raw.data() + 1, &fp, sizeof(fp));
  raw += last_id;
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<std::string> DecodePageToken(const v1::ListJobsRequest& req) {
  if (req.page_token().empty()) return std::string();
  std::string raw;
  uint64_t fp = 0;
  if (!absl::WebSafeBase64Unescape(req.page_token(), &raw) ||
      raw.size() < 1 + sizeof(fp) || raw[0] != kVersion) {
    return absl::InvalidArgumentError(
        "page_token: not a token from a ListJobs response");
  }
  std::memcpy(&fp, raw.data() + 1, sizeof(fp));
  if (fp != Fingerprint(req)) {
    return absl::InvalidArgumentError(
        "page_token: made for another query (topic, id_prefix, states and "
        "due range must stay the same across pages)");
  }
  return raw.substr(1 + sizeof(fp));
}

}  // namespace delayd::server
