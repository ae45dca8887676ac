// Ack tokens: the opaque string a Delivery carries and Ack, Nack and
// ExtendLease take back. A token names one delivery: (topic, id, attempt,
// nonce, check). The nonce and the check are 128 bits drawn per delivery
// from the OS CSPRNG (getrandom(2)); the nonce is also stored with the job
// while it is IN_FLIGHT, the check only in the lease (memory). So a token
// cannot be predicted from earlier ones, nor rebuilt from the store. A token
// whose nonce and check are not its lease's is stale; one that does not
// decode is malformed. Pure functions; thread-safe.
//
// Format (version 2), URL-safe base64 without padding of:
//   0x02 | varint attempt | fixed64 nonce | fixed64 check (little endian) |
//   varint len(topic) | topic | id
// With the default limits on topic (128 bytes) and id (256), at most
// 1 + 5 + 16 + 2 + 128 + 256 = 408 bytes, 544 characters encoded
// (MaxAckTokenChars). A version 1 token (no check; from before an upgrade,
// hence a restart) decodes with check 0, which no lease has: stale.
#ifndef DELAYD_SERVER_DELIVERY_ACK_TOKEN_H_
#define DELAYD_SERVER_DELIVERY_ACK_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace delayd::server {

struct AckToken {
  std::string topic;
  std::string id;
  uint32_t attempt = 0;
  uint64_t nonce = 0;
  uint64_t check = 0;
};

std::string EncodeAckToken(const AckToken& token);

// The length of the longest token whose topic has at most `max_topic_bytes`
// and whose id at most `max_id_bytes`.
size_t MaxAckTokenChars(size_t max_topic_bytes, size_t max_id_bytes);

// INVALID_ARGUMENT naming `field` when `text` is not a token of this format,
// or is longer than `max_chars` (checked before decoding anything).
absl::StatusOr<AckToken> DecodeAckToken(absl::string_view field,
                                        absl::string_view text,
                                        size_t max_chars);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_ACK_TOKEN_H_
