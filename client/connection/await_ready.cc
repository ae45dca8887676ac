#include "client/connection/await_ready.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace delayd::connection {

grpc_connectivity_state AwaitReady(grpc::Channel& channel, absl::Time deadline,
                                   absl::Duration patience) {
  absl::Time give_up = deadline;
  bool failed_before = false;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_SHUTDOWN) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !failed_before) {
      failed_before = true;
      give_up = std::min(deadline, absl::Now() + patience);
    }
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(give_up))) {
      break;
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return state;
}

}  // namespace delayd::connection
