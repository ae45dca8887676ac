#include "server/delivery/ack_token.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace delayd::server {
namespace {

constexpr char kVersion = 2;
constexpr char kVersionWithoutCheck = 1;
// Version, varint attempt (at most 5 bytes for 32 bits), nonce, check, and
// a varint topic length.
constexpr size_t kMaxFixedBytes = 1 + 5 + 8 + 8 + 10;

void PutFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetFixed64(absl::string_view& in, uint64_t& v) {
  if (in.size() < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  in.remove_prefix(8);
  return true;
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::string EncodeAckToken(const AckToken& token) {
  std::string raw(1, kVersion);
  PutVarint(raw, token.attempt);
  PutFixed64(raw, token.nonce);
  PutFixed64(raw, token.check);
  PutVarint(raw, token.topic.size());
  raw += token.topic;
  raw += token.id;
  std::string out;
  absl::WebSafeBase64Escape(raw, &out);
  return out;
}

size_t MaxAckTokenChars(size_t max_topic_bytes, size_t max_id_bytes) {
  const size_t raw = kMaxFixedBytes + max_topic_bytes + max_id_bytes;
  return (raw + 2) / 3 * 4;  // base64, unpadded: never more than this
}

absl::StatusOr<AckToken> DecodeAckToken(absl::string_view field,
                                        absl::string_view text,
                                        size_t max_chars) {
  const absl::Status malformed = absl::InvalidArgumentError(
      absl::StrCat(field, ": not an ack token issued by this server"));
  std::string raw;
  if (text.empty() || text.size() > max_chars ||
      !absl::WebSafeBase64Unescape(text, &raw)) {
    return malformed;
  }
  absl::string_view in(raw);
  if (in.empty() ||
      (in.front() != kVersion && in.front() != kVersionWithoutCheck)) {
    return malformed;
  }
  const bool has_check = in.front() == kVersion;
  in.remove_prefix(1);
  AckToken token;
  uint64_t attempt = 0, topic_size = 0;
  if (!GetVarint(in, attempt) || attempt == 0 || attempt > UINT32_MAX ||
      !GetFixed64(in, token.nonce) ||
      (has_check && !GetFixed64(in, token.check))) {
    return malformed;
  }
  token.attempt = static_cast<uint32_t>(attempt);
  if (!GetVarint(in, topic_size) || topic_size == 0 || topic_size > in.size()) {
    return malformed;
  }
  token.topic = std::string(in.substr(0, topic_size));
  token.id = std::string(in.substr(topic_size));
  return token;
}

}  // namespace delayd::server
