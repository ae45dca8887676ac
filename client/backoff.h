// Jittered exponential backoff shared by Client retries and Subscriber
// reconnects. Stateless; thread-safe with one BitGen per thread.
#ifndef DELAYD_CLIENT_BACKOFF_H_
#define DELAYD_CLIENT_BACKOFF_H_

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace delayd::client {

// A random time in [backoff/2, backoff] ("equal jitter"), so that clients
// failing together do not retry in lockstep.
inline absl::Duration Jittered(absl::BitGen& random, absl::Duration backoff) {
  return backoff *
         absl::Uniform<double>(absl::IntervalClosed, random, 0.5, 1.0);
}

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_BACKOFF_H_
