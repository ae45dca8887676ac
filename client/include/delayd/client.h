// The delayd client library — its one public header.
//
// Client: a blocking, typed call for every rpc of delayd.v1.DelayQueue, each
// returning absl::Status / absl::StatusOr, with a deadline per call (a
// default in ClientOptions, overridable per call) and retries of UNAVAILABLE
// for the calls that are safe to repeat (see "Retries" below).
// Subscriber: runs a handler for every delivery of one topic on a small
// thread pool; acks in batches on success, nacks on failure, extends the
// lease of a handler that runs long, reconnects with backoff when the stream
// breaks, and stops cleanly.
//
// Security: ClientOptions::credentials for TLS (TlsCredentials() reads the
// PEM files, for mutual TLS too) and ClientOptions::token, the bearer token
// every call and stream carries (default $DELAYD_TOKEN).
//
// Thread-safety: Client and Subscriber are thread-safe. Share one Client per
// process and server: it holds one gRPC channel (one HTTP/2 connection).
//
// Retries. A call is retried on UNAVAILABLE (server down, restarting,
// recovering, store write refused) only when repeating it leaves the server
// as one successful call would, within the call's deadline, with jittered
// exponential backoff (RpcRetryPolicy):
//   * Schedule with an id: an identical retry returns the existing job
//     (created = false — also when the lost first attempt created it).
//     Under IF_EXISTS_REPLACE a retry replaces the job again, with the same
//     spec. Schedule without an id is NOT retried: the server makes a new id
//     per attempt, so a retry could create a duplicate job.
//   * ScheduleBatch: retried only when every request has an id.
//   * Reschedule, CancelByPrefix, Redrive: a repeat sets the same state (a
//     delay counts from the retry). The counts returned are the last
//     attempt's.
//   * GetJob, ListJobs, GetStats, CheckHealth: reads.
//   * Ack, Nack, ExtendLease: a repeat after a lost attempt that took effect
//     is refused as stale (FAILED_PRECONDITION) and changes nothing; the job
//     is done, retried or extended as asked.
//   * Over the ScheduleStream (ClientOptions::schedule_stream), an attempt
//     is one request on the stream, and it fails UNAVAILABLE, like a unary
//     attempt, when the stream breaks before answering it, or when a
//     stream is to be opened and the connection is not ready (nothing is
//     sent then).
//   * Cancel is NOT retried: its answer is the point (CANCELED vs NOT_FOUND
//     tells "the timeout will not fire" from "it already fired"), and a
//     retry after a lost attempt that canceled would answer NOT_FOUND.
//     Call it again yourself, knowing that.
// DEADLINE_EXCEEDED and every other code are returned at once.
// Before a call's first attempt the client waits for a connection, giving a
// connection attempt that failed time for one more (max_reconnect_backoff
// plus 1 s): a failed attempt sent nothing, so this holds for every call, the
// ones that are never retried too. (gRPC 1.51 can fail an attempt that was
// still in progress, grpc/grpc#35064.) So a server that is down is reported
// after that wait (3 s by default), or at the deadline if it is sooner.
#ifndef DELAYD_CLIENT_INCLUDE_DELAYD_CLIENT_H_
#define DELAYD_CLIENT_INCLUDE_DELAYD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "delayd/v1/delayd.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/sync_stream.h"

namespace delayd::client {

class SchedulePipe;

// ---------------------------------------------------------------------------
// Options

// How a retried call backs off. The n-th retry sleeps a random time in
// [b/2, b] with b = min(initial_backoff * backoff_multiplier^(n-1),
// max_backoff), never past the call's deadline.
struct RpcRetryPolicy {
  // Attempts in all, the first included; 1 turns retries off. Default 5.
  int max_attempts = 5;
  // Default 100 ms.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  // Default 2 s.
  absl::Duration max_backoff = absl::Seconds(2);
  // Default 2.
  double backoff_multiplier = 2.0;
};

struct ClientOptions {
  // host:port (or any gRPC target URI). Default "127.0.0.1:7400", delayd's
  // default --listen.
  std::string target = "127.0.0.1:7400";
  // The deadline of a call that sets none, covering all its attempts.
  // Default 10 s.
  absl::Duration default_deadline = absl::Seconds(10);
  RpcRetryPolicy retry;
  // Channel credentials. Default (null): insecure, plain TCP. For TLS see
  // TlsCredentials() below.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Bearer token sent with every call as `authorization: Bearer TOKEN`.
  // Empty (the default): the value of DELAYD_TOKEN when the Client is made,
  // if set; else none. Printable ASCII only: with another byte every call
  // fails with INVALID_ARGUMENT (sent as it is, gRPC would abort).
  std::string token;
  // Longest wait of the channel between two connection attempts (and two
  // DNS resolutions) while the server is unreachable; gRPC's own defaults,
  // 120 s and 30 s, are far too long to notice a restarted server.
  // Default 2 s.
  absl::Duration max_reconnect_backoff = absl::Seconds(2);
  // How long one connection attempt (TCP and HTTP/2 handshakes) may take
  // before the channel abandons it and tries again; gRPC's own default is
  // 20 s. Default 5 s.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Schedule, Reschedule and Cancel go over one ScheduleStream that every
  // thread of the Client shares (true, the default), not a unary rpc each.
  // Calls that come while a stream message is on its way leave together in
  // the next, up to 1000 per message, so each costs far less than a unary
  // call; a lone call is sent at once. Each call still gets exactly its own
  // result, with the same retries, deadline and durability as the unary
  // rpc (an OK means the server synced it under --sync=always). When the
  // stream breaks, the calls it did not answer fail with its status (and
  // are retried under the rules below); the next call opens a new stream.
  // false: a unary rpc per call.
  bool schedule_stream = true;
  // Opt-in batching over that stream (Kafka's linger.ms): a call waits up
  // to this long for others to fill a message of 1000 before it is sent.
  // It raises throughput when many threads call at once, at the cost of up
  // to this much latency per call. Zero (the default): no waiting. Taken as
  // at most 1 s.
  absl::Duration linger = absl::ZeroDuration();
};

// TLS credentials for ClientOptions::credentials, from PEM files read now:
// the server's certificate must chain to the CAs in `ca_file` (empty: the
// system's roots), and for mutual TLS `cert_file` and `key_file` are the
// client's certificate chain and private key (both or neither). The name
// checked in the server's certificate is the host of ClientOptions::target
// (to check another, make the channel yourself with
// GRPC_SSL_TARGET_NAME_OVERRIDE_ARG and pass it to Client). INVALID_ARGUMENT
// naming the file that cannot be read or is not PEM, or naming both of
// cert_file and key_file when only one is given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(
    const std::string& ca_file, const std::string& cert_file = "",
    const std::string& key_file = "");

// Per-call overrides of ClientOptions.
struct CallOptions {
  // The call's deadline, from now, covering all its attempts.
  std::optional<absl::Duration> deadline;
  // The retry policy of this call (only calls that retry at all use it).
  std::optional<RpcRetryPolicy> retry;
};

// ---------------------------------------------------------------------------
// Building requests

// A JobSpec due `delay` from now (zero: now).
v1::JobSpec JobAfter(const std::string& topic, const std::string& id,
                     const std::string& payload, absl::Duration delay);
// A JobSpec due at `fire_at` (a time in the past fires now).
v1::JobSpec JobAt(const std::string& topic, const std::string& id,
                  const std::string& payload, absl::Time fire_at);

// Conversions between Abseil and protobuf time (millisecond precision is
// all the server keeps): delayd/proto_time.h's, under this namespace too.
using ::delayd::FromProto;
using ::delayd::ToProto;

// ---------------------------------------------------------------------------
// Client

// One Subscribe stream, read by the caller (Subscriber does it for you).
// The stream has no deadline. Next() is for one reading thread; Cancel()
// may be called from any thread.
class DeliveryStream {
 public:
  DeliveryStream(const DeliveryStream&) = delete;
  DeliveryStream& operator=(const DeliveryStream&) = delete;
  ~DeliveryStream();  // cancels the stream if it is still open

  // Blocks for the next delivery; false when the stream has ended. The
  // server sends several per stream message when several are ready: Next
  // hands them out one at a time.
  bool Next(v1::Delivery* delivery);
  // Ends the stream: Next() returns false soon after.
  void Cancel();
  // REQUIRES: Next() returned false. The stream's final status: CANCELLED
  // after Cancel(), UNAVAILABLE when the server went away or shut down,
  // INVALID_ARGUMENT when it refused the subscription.
  absl::Status Finish();

 private:
  friend class Client;
  DeliveryStream() = default;

  grpc::ClientContext context_;
  // Null when the stream was refused before it was opened (error_).
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader_;
  absl::Status error_;
  v1::SubscribeResponse message_;  // the last read
  int next_ = 0;                   // message_'s first delivery not handed out
  bool finished_ = false;
};

class Client {
 public:
  // Connects lazily: the first call opens the connection.
  explicit Client(ClientOptions options = {});
  // Uses `channel` as it is (its own credentials and arguments);
  // options.target, credentials, max_reconnect_backoff and connect_timeout
  // are ignored (options.token is not).
  Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Creates a job. Retried only when job.id() is set (see above).
  absl::StatusOr<v1::ScheduleResponse> Schedule(
      const v1::JobSpec& job, v1::IfExists if_exists = v1::IF_EXISTS_FAIL,
      const CallOptions& call = {});
  // 1-1000 requests in one store write; one result per request, in order.
  absl::StatusOr<std::vector<v1::ScheduleResult>> ScheduleBatch(
      const std::vector<v1::ScheduleRequest>& requests,
      const CallOptions& call = {});

  // Moves a SCHEDULED or READY job to `delay` from now / to `fire_at`.
  absl::StatusOr<v1::Job> Reschedule(const std::string& topic,
                                     const std::string& id,
                                     absl::Duration delay,
                                     const CallOptions& call = {});
  absl::StatusOr<v1::Job> Reschedule(const std::string& topic,
                                     const std::string& id, absl::Time fire_at,
                                     const CallOptions& call = {});

  // The definite answer: outcome and, unless NOT_FOUND, the job. Not
  // retried.
  absl::StatusOr<v1::CancelResponse> Cancel(const std::string& topic,
                                            const std::string& id,
                                            const CallOptions& call = {});
  // Cancels every live job of `topic` whose id starts with `id_prefix`
  // (empty: all); the number canceled.
  absl::StatusOr<uint64_t> CancelByPrefix(const std::string& topic,
                                          const std::string& id_prefix,
                                          const CallOptions& call = {});

  // NOT_FOUND when there is no such job.
  absl::StatusOr<v1::Job> GetJob(const std::string& topic,
                                 const std::string& id,
                                 const CallOptions& call = {});
  // One page.
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const v1::ListJobsRequest& request, const CallOptions& call = {});
  // Every page of `request` (from its page_token on), each page one call
  // with its own deadline.
  absl::StatusOr<std::vector<v1::Job>> ListAllJobs(
      v1::ListJobsRequest request, const CallOptions& call = {});

  // Opens a Subscribe stream. `max_in_flight` 0 means the server's 100;
  // `max_batch` (deliveries per stream message) 0 means no limit.
  // A refusal (bad topic, server unavailable, a token the server does not
  // know or that cannot be sent) shows in the stream's Finish(). Never
  // retried: Subscriber reconnects.
  std::unique_ptr<DeliveryStream> Subscribe(const std::string& topic,
                                            const std::string& consumer,
                                            uint32_t max_in_flight,
                                            uint32_t max_batch = 0);

  // One result per token, in order; the call fails only as a whole (no
  // tokens, over 1000, unreachable).
  absl::StatusOr<std::vector<v1::AckResult>> Ack(
      const std::vector<std::string>& ack_tokens, const CallOptions& call = {});
  // Gives a delivery back: retried after `retry_after` (unset: the job's
  // retry backoff) or, with `dead_letter`, DEAD now. The job after the nack.
  absl::StatusOr<v1::Job> Nack(const std::string& ack_token,
                               std::optional<absl::Duration> retry_after,
                               const std::string& reason,
                               bool dead_letter = false,
                               const CallOptions& call = {});
  // Sets the lease to end `extend_by` from now; the new end.
  absl::StatusOr<absl::Time> ExtendLease(const std::string& ack_token,
                                         absl::Duration extend_by,
                                         const CallOptions& call = {});

  // Puts DEAD jobs back to SCHEDULED, due now; the number redriven.
  absl::StatusOr<uint64_t> Redrive(const std::string& topic,
                                   const std::string& id_prefix,
                                   const CallOptions& call = {});
  // Counts of `topic` (empty: every topic, ordered by topic).
  absl::StatusOr<std::vector<v1::TopicStats>> GetStats(
      const std::string& topic = "", const CallOptions& call = {});
  // OK when the server reports SERVING (grpc.health.v1), UNAVAILABLE when
  // it is NOT_SERVING (e.g. still recovering).
  absl::Status CheckHealth(const CallOptions& call = {});

 private:
  // Runs attempt(deadline) under the retry rules above; each attempt
  // returns a grpc::Status.
  template <typename Fn>
  absl::Status Retrying(bool retry, const CallOptions& call, Fn attempt);
  // A unary rpc: attempt(context), each attempt with a context of its own.
  template <typename Fn>
  absl::Status Call(bool retry, const CallOptions& call, Fn attempt);
  // A request over the ScheduleStream; `answer` holds the answer of the
  // attempt that succeeded.
  absl::Status Streamed(bool retry, const CallOptions& call,
                        const v1::StreamRequest& request,
                        v1::StreamAnswer* answer);
  // Both Reschedule overloads, once the new time is set in `request`.
  absl::StatusOr<v1::Job> DoReschedule(const std::string& topic,
                                       const std::string& id,
                                       v1::RescheduleRequest request,
                                       const CallOptions& call);

  // Adds the token's metadata to a context of this client, if there is a
  // token.
  void Authorize(grpc::ClientContext* context) const;

  const ClientOptions options_;
  // The token sent (options_.token, else $DELAYD_TOKEN); empty: none.
  const std::string token_;
  // Why the token cannot be sent (INVALID_ARGUMENT), else OK; every call
  // returns it.
  const absl::Status token_error_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::DelayQueue::Stub> stub_;
  // Null unless options_.schedule_stream.
  const std::unique_ptr<SchedulePipe> pipe_;
};

// ---------------------------------------------------------------------------
// Subscriber

// Processes one delivery. OK: the delivery is acked (in a batch). An error:
// it is nacked with the error as reason, retried after the job's backoff —
// or as RetryAfter / DeadLetter below ask. Called concurrently from the
// subscriber's handler threads; a handler that throws counts as failed
// (INTERNAL).
using Handler = std::function<absl::Status(const v1::Delivery& delivery)>;

// An error asking to retry no earlier than `retry_after` from now.
// REQUIRES: !error.ok().
absl::Status RetryAfter(absl::Status error, absl::Duration retry_after);
// An error asking to move the job to the dead letters now (no retry).
// REQUIRES: !error.ok().
absl::Status DeadLetter(absl::Status error);

struct SubscriberOptions {
  // Required: 1-128 bytes of [A-Za-z0-9._:-].
  std::string topic;
  // A name in the server's logs. Default (empty): "<hostname>-<pid>".
  std::string consumer;
  // Most deliveries held at once (running or waiting for a handler thread);
  // the server sends no more until some are acked or nacked. 1-10000.
  // Default 100.
  uint32_t max_in_flight = 100;
  // Threads running the handler. Default 4.
  int handler_threads = 4;
  // Acks wait at most this long to be sent together in one Ack rpc...
  // Default 5 ms.
  absl::Duration ack_flush_interval = absl::Milliseconds(5);
  // ...or go as soon as this many are pending. 1-1000. Default 500.
  size_t ack_batch_size = 500;
  // While a handler runs, renew its delivery's lease (by the job's lease
  // duration) each time a third of the lease is left. Default true.
  bool extend_leases = true;
  // Reconnect backoff after the stream breaks: the n-th consecutive failed
  // attempt waits a random time in [b/2, b], b = min(initial * 2^(n-1),
  // max). A stream that delivered anything resets it. Defaults 100 ms, 5 s.
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(5);
  // Called, from the subscriber's threads, with every error it handles
  // itself: a broken stream, a failed Ack, Nack or ExtendLease. Must not
  // block. Default: none.
  std::function<void(const absl::Status&)> on_error;
};

// Counters since Start; a consistent-enough snapshot (each read atomically).
struct SubscriberStats {
  uint64_t streams_opened = 0;  // Subscribe calls made (1 + reconnects)
  uint64_t deliveries = 0;      // deliveries received
  uint64_t handled_ok = 0;      // handler returned OK
  uint64_t handler_errors = 0;  // handler returned an error (or threw)
  uint64_t dropped = 0;       // received but never handled: the stream broke or
                              // Stop came first (the server redelivers them)
  uint64_t ack_rpcs = 0;      // Ack rpcs sent (each carries a batch)
  uint64_t acked = 0;         // tokens acked OK
  uint64_t ack_failures = 0;  // tokens refused (stale) or in failed rpcs
  uint64_t nacks = 0;         // Nack rpcs that succeeded
  uint64_t nack_failures = 0;     // Nack rpcs that failed
  uint64_t lease_extensions = 0;  // ExtendLease rpcs that succeeded
  uint64_t lease_extension_failures = 0;
};

class Subscriber {
 public:
  // Validates `options` (INVALID_ARGUMENT naming the field) and starts: a
  // reading thread, `handler_threads` handler threads, an ack thread and a
  // lease thread. `client` must outlive the Subscriber.
  static absl::StatusOr<std::unique_ptr<Subscriber>> Start(
      Client* client, SubscriberOptions options, Handler handler);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  // Stop().
  ~Subscriber();

  // Stops cleanly, in this order: no new handler starts (deliveries not yet
  // started are dropped), running handlers finish, their acks and nacks are
  // sent, then the stream ends — so the server redelivers the dropped ones
  // at once, to other subscribers. Blocks until done (the final Ack rpc
  // included, up to the Client's deadline); idempotent.
  // REQUIRES: not called from the handler (it waits for the handlers).
  void Stop();

  SubscriberStats stats() const;
  // OK while running or reconnecting; the server's refusal once it refused
  // the subscription for good (INVALID_ARGUMENT, PERMISSION_DENIED,
  // UNAUTHENTICATED, UNIMPLEMENTED, NOT_FOUND), after which it stops
  // reconnecting.
  absl::Status status() const;

  class Impl;

 private:
  explicit Subscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_INCLUDE_DELAYD_CLIENT_H_
