// AwaitReady: wait for a gRPC channel to connect before a call, giving a
// failed connection attempt a short while to be followed by one that works.
// Shared by the client library and delayctl (which must not depend on the
// library). Thread-safe as grpc::Channel is.
#ifndef DELAYD_CLIENT_CONNECTION_AWAIT_READY_H_
#define DELAYD_CLIENT_CONNECTION_AWAIT_READY_H_

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace delayd::connection {

// Asks `channel` to connect and waits until it is READY (or SHUTDOWN), or
// until `deadline`, or until `patience` has passed since a connection attempt
// first failed, whichever comes first. Returns the state it ended in.
//
// Why a failed attempt is worth waiting out: it sent no request, so trying
// again is safe for every rpc, and besides real refusals gRPC 1.51 can fail
// an attempt that was still in progress (it reads connect(2)'s errno after
// other calls that may change it, grpc/grpc#35064; seen on machines without
// /sys, where glibc's malloc arena setup leaves ENOENT there). How soon the
// next attempt comes is the channel's reconnect backoff: set
// GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS and, because gRPC 1.51 reconnects only
// after the resolver answers anew, GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS
// well under `patience`.
grpc_connectivity_state AwaitReady(grpc::Channel& channel, absl::Time deadline,
                                   absl::Duration patience);

}  // namespace delayd::connection

#endif  // DELAYD_CLIENT_CONNECTION_AWAIT_READY_H_
