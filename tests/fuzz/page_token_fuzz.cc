// Fuzz target: ListJobs page tokens (server/core/page_token.h), opaque
// strings any client hands back.
//
// The input, cut at NUL bytes: page_token NUL topic NUL id_prefix NUL states
// (one byte a state); missing parts are empty. A refusal is
// INVALID_ARGUMENT naming page_token. A token made by EncodePageToken for
// the query decodes to the id it carries, and is refused for another topic.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "delayd/v1/delayd.pb.h"
#include "server/core/page_token.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using delayd::server::DecodePageToken;
using delayd::server::EncodePageToken;
namespace v1 = delayd::v1;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts =
      delayd::fuzz::Split(delayd::fuzz::AsText(data, size), '\0', 4);
  v1::ListJobsRequest req;
  req.set_page_token(parts[0]);
  if (parts.size() > 1) req.set_topic(parts[1]);
  if (parts.size() > 2) req.set_id_prefix(parts[2]);
  if (parts.size() > 3) {
    for (const char c : parts[3]) {
      req.add_states(
          static_cast<v1::JobState>(static_cast<unsigned char>(c) % 8));
    }
  }

  absl::StatusOr<std::string> last_id = DecodePageToken(req);
  if (!last_id.ok()) {
    FUZZ_CHECK(last_id.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(last_id.status().message(), "page_token: "));
  } else if (req.page_token().empty()) {
    FUZZ_CHECK(last_id->empty());
  }

  // Whatever the client sent, the server's own token for this query, with
  // the id the input carried (or the input itself), round-trips.
  const std::string id = last_id.ok() ? *last_id : parts[0];
  v1::ListJobsRequest next = req;
  next.set_page_token(EncodePageToken(req, id));
  absl::StatusOr<std::string> decoded = DecodePageToken(next);
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(*decoded == id);
  // ... and only for this query.
  next.set_topic(req.topic() + "x");
  FUZZ_CHECK(!DecodePageToken(next).ok());
  return 0;
}
