// Fuzz target: ack tokens (server/delivery/ack_token.h), the strings Ack,
// Nack and ExtendLease take back from any client.
//
// The input is a token's text. It is decoded under the default limits and
// under the largest the flags allow (as access.cc decodes it); a refusal is
// INVALID_ARGUMENT naming the field, and a token that decodes encodes, within
// MaxAckTokenChars, to one that decodes to the same fields. The input is
// also read as a token's fields (attempt, nonce, check, topic length, then
// topic and id), which must survive Encode then Decode unchanged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "server/delivery/ack_token.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using delayd::server::AckToken;
using delayd::server::DecodeAckToken;
using delayd::server::EncodeAckToken;
using delayd::server::MaxAckTokenChars;

bool SameFields(const AckToken& a, const AckToken& b) {
  return a.topic == b.topic && a.id == b.id && a.attempt == b.attempt &&
         a.nonce == b.nonce && a.check == b.check;
}

void CheckDecode(absl::string_view text, size_t max_chars) {
  absl::StatusOr<AckToken> token = DecodeAckToken("ack_token", text, max_chars);
  if (!token.ok()) {
    FUZZ_CHECK(token.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(token.status().message(), "ack_token: "));
    return;
  }
  FUZZ_CHECK(text.size() <= max_chars);
  FUZZ_CHECK(token->attempt >= 1);
  FUZZ_CHECK(!token->topic.empty());
  const std::string again = EncodeAckToken(*token);
  FUZZ_CHECK(again.size() <=
             MaxAckTokenChars(token->topic.size(), token->id.size()));
  absl::StatusOr<AckToken> decoded =
      DecodeAckToken("ack_token", again, again.size());
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(SameFields(*decoded, *token));
}

uint64_t Fixed64(absl::string_view& in) {
  uint64_t v = 0;
  for (int i = 0; i < 8 && !in.empty(); ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in.front()))
         << (8 * i);
    in.remove_prefix(1);
  }
  return v;
}

// Encode then Decode of a token made from the input's bytes.
void CheckEncode(absl::string_view in) {
  AckToken token;
  token.attempt = static_cast<uint32_t>(Fixed64(in));
  token.nonce = Fixed64(in);
  token.check = Fixed64(in);
  const size_t topic_size =
      in.empty() ? 0 : static_cast<unsigned char>(in.front());
  if (!in.empty()) in.remove_prefix(1);
  token.topic = std::string(in.substr(0, topic_size));
  token.id = std::string(in.substr(std::min(topic_size, in.size())));
  if (token.attempt == 0 || token.topic.empty()) return;  // never issued
  const std::string text = EncodeAckToken(token);
  FUZZ_CHECK(text.size() <=
             MaxAckTokenChars(token.topic.size(), token.id.size()));
  absl::StatusOr<AckToken> decoded =
      DecodeAckToken("ack_token", text, text.size());
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(SameFields(*decoded, token));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  CheckDecode(text, MaxAckTokenChars(128, 256));  // the default limits
  CheckDecode(text, MaxAckTokenChars(4096, 4096));
  CheckEncode(text);
  return 0;
}
