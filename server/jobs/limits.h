// Limits: the bounds delayd puts on client input, each a server flag. A plain
// value, read-only after startup. Defaults are those of the API contract.
#ifndef DELAYD_SERVER_JOBS_LIMITS_H_
#define DELAYD_SERVER_JOBS_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace delayd::server {

struct Limits {
  // topic: 1..max_topic_bytes of [A-Za-z0-9._:-].
  size_t max_topic_bytes = 128;
  // id: 0..max_id_bytes of UTF-8 without control characters.
  size_t max_id_bytes = 256;
  // payload: at most this many bytes (1 MiB).
  size_t max_payload_bytes = 1 << 20;
  // fire_at: at most this far ahead of now (100 years of 365.25 days).
  absl::Duration max_schedule_ahead = absl::Hours(24 * 36525);
  // ScheduleBatch requests, and Ack tokens per call.
  size_t max_batch = 1000;
  // Subscribe max_in_flight: 1..max_in_flight, 0 meaning default_in_flight.
  uint32_t max_in_flight = 10000;
  uint32_t default_in_flight = 100;
  // ListJobs page_size: 1..max_page_size, 0 meaning default_page_size.
  uint32_t max_page_size = 1000;
  uint32_t default_page_size = 100;
  // labels: at most max_labels, keys 1..max_label_key_bytes, values at most
  // max_label_value_bytes.
  size_t max_labels = 32;
  size_t max_label_key_bytes = 64;
  size_t max_label_value_bytes = 256;
  // RetryPolicy.max_attempts at most this.
  uint32_t max_attempts = 1000;
  // Nack reason (stored as last_error): longer ones are truncated.
  size_t max_reason_bytes = 1024;
  // Lease and ExtendLease extend_by: at most this.
  absl::Duration max_lease = absl::Hours(12);
  // Replies: at most this many bytes, what a gRPC client receives by default
  // (4 MiB). A ListJobs page ends early rather than pass it; a ScheduleBatch
  // whose reply (which echoes every job) would pass it is refused.
  size_t max_reply_bytes = 4 << 20;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_LIMITS_H_
