// Ack tokens: the opaque string a Delivery carries and Ack, Nack and
// ExtendLease take back. A token names one delivery: (topic, id, attempt,
// nonce), where the nonce is random per delivery and stored with the job
// while it is IN_FLIGHT. A token whose nonce is not the job's current one is
// stale; one that does not decode is malformed. Pure functions; thread-safe.
//
// Format (version 1), URL-safe base64 without padding of:
//   0x01 | varint attempt | fixed64 nonce (little endian) |
//   varint len(topic) | topic | id
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
};

std::string EncodeAckToken(const AckToken& token);

// INVALID_ARGUMENT naming `field` when `text` is not a token of this format.
absl::StatusOr<AckToken> DecodeAckToken(absl::string_view field,
                                        absl::string_view text);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_ACK_TOKEN_H_
