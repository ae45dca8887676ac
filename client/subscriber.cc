// Subscriber::Impl — the threads of a Subscriber:
//   reader:   opens the stream, queues deliveries, reconnects with backoff;
//   handlers: run the handler, hand the token to the AckBatcher or nack it;
//   AckBatcher and LeaseKeeper: one thread each (see their headers).
// A delivery's lease is kept alive from its receipt until its handler
// returns. When a stream breaks its queued deliveries are dropped: the
// server has already released them for redelivery.
#include <unistd.h>

#include <atomic>
#include <deque>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/ack_batcher.h"
#include "client/backoff.h"
#include "client/handler_status.h"
#include "client/lease_keeper.h"
#include "delayd/client.h"

namespace delayd::client {
namespace {

// The server keeps 1024 bytes of a nack's reason.
constexpr size_t kMaxReasonBytes = 1024;

std::string DefaultConsumer() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] != '\0' ? host : "unknown", "-", getpid());
}

// Refusals that a new attempt would get again.
bool Permanent(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s) ||
         absl::IsUnauthenticated(s) || absl::IsUnimplemented(s) ||
         absl::IsNotFound(s);
}

absl::Status Validate(const SubscriberOptions& o, const Handler& handler) {
  if (o.topic.empty()) {
    return absl::InvalidArgumentError("topic: required (1-128 bytes)");
  }
  if (o.max_in_flight < 1 || o.max_in_flight > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_in_flight: must be 1-10000, got ", o.max_in_flight));
  }
  if (o.handler_threads < 1 || o.handler_threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handler_threads: must be 1-1024, got ", o.handler_threads));
  }
  if (o.ack_batch_size < 1 || o.ack_batch_size > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("ack_batch_size: must be 1-1000, got ", o.ack_batch_size));
  }
  if (o.ack_flush_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ack_flush_interval: must be >= 0");
  }
  if (o.reconnect_initial_backoff <= absl::ZeroDuration() ||
      o.reconnect_max_backoff < o.reconnect_initial_backoff) {
    return absl::InvalidArgumentError(
        "reconnect_initial_backoff: must be > 0 and at most "
        "reconnect_max_backoff");
  }
  if (!handler) return absl::InvalidArgumentError("handler: required");
  return absl::OkStatus();
}

}  // namespace

class Subscriber::Impl {
 public:
  Impl(Client* client, SubscriberOptions options, Handler handler)
      : client_(client),
        options_(std::move(options)),
        handler_(std::move(handler)),
        acks_(
            [client](const std::vector<std::string>& tokens) {
              return client->Ack(tokens);
            },
            [this](const absl::Status& s) { ReportError(s); },
            options_.ack_flush_interval, options_.ack_batch_size),
        leases_(
            [client](const std::string& token, absl::Duration extend_by,
                     absl::Duration timeout) {
              CallOptions call;
              call.deadline = timeout;
              return client->ExtendLease(token, extend_by, call);
            },
            [this](const absl::Status& s) { ReportError(s); }) {
    reader_ = std::thread([this] { ReadLoop(); });
    for (int i = 0; i < options_.handler_threads; ++i) {
      workers_.emplace_back([this] { WorkLoop(); });
    }
  }

  ~Impl() { Stop(); }

  void Stop() {
    absl::MutexLock stop_lock(&stop_mu_);
    if (stopped_) return;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      DropQueuedLocked();
    }
    for (std::thread& t : workers_) t.join();
    leases_.Stop();
    acks_.Stop();
    {
      absl::MutexLock lock(&mu_);
      if (stream_ != nullptr) stream_->Cancel();
    }
    reader_.join();
    stopped_ = true;
  }

  SubscriberStats stats() const {
    SubscriberStats s;
    s.streams_opened = streams_opened_.load();
    s.deliveries = deliveries_.load();
    s.handled_ok = handled_ok_.load();
    s.handler_errors = handler_errors_.load();
    s.dropped = dropped_.load();
    const AckBatcher::Stats acks = acks_.stats();
    s.ack_rpcs = acks.rpcs;
    s.acked = acks.acked;
    s.ack_failures = acks.failures;
    s.nacks = nacks_.load();
    s.nack_failures = nack_failures_.load();
    const LeaseKeeper::Stats leases = leases_.stats();
    s.lease_extensions = leases.extensions;
    s.lease_extension_failures = leases.failures;
    return s;
  }

  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  struct Work {
    v1::Delivery delivery;
  };

  void ReadLoop() {
    const std::string consumer =
        options_.consumer.empty() ? DefaultConsumer() : options_.consumer;
    absl::BitGen random;
    absl::Duration backoff = options_.reconnect_initial_backoff;
    while (true) {
      std::unique_ptr<DeliveryStream> stream =
          client_->Subscribe(options_.topic, consumer, options_.max_in_flight);
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) break;
        stream_ = stream.get();
      }
      ++streams_opened_;
      const absl::Time opened = absl::Now();
      bool delivered = false;
      v1::Delivery delivery;
      while (stream->Next(&delivery)) {
        delivered = true;
        Enqueue(std::move(delivery));
        delivery.Clear();
      }
      const absl::Status end = stream->Finish();
      {
        absl::MutexLock lock(&mu_);
        stream_ = nullptr;
        DropQueuedLocked();
        if (stopping_) break;
        if (Permanent(end)) {
          status_ = end;
        }
      }
      ReportError(absl::Status(
          end.code(), absl::StrCat("Subscribe stream of ", options_.topic,
                                   " ended: ", end.message())));
      if (Permanent(end)) break;
      if (delivered || absl::Now() - opened > options_.reconnect_max_backoff) {
        backoff = options_.reconnect_initial_backoff;
      }
      const absl::Duration sleep = Jittered(random, backoff);
      backoff = std::min(backoff * 2, options_.reconnect_max_backoff);
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), sleep)) break;
    }
  }

  void Enqueue(v1::Delivery delivery) {
    ++deliveries_;
    if (options_.extend_leases) {
      const absl::Time now = absl::Now();
      absl::Duration lease = FromProto(delivery.job().retry().lease());
      if (lease <= absl::ZeroDuration()) {
        lease = FromProto(delivery.lease_expires_at()) - now;
      }
      if (lease > absl::ZeroDuration()) {
        leases_.Track(delivery.ack_token(), now, lease);
      }
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ++dropped_;
      leases_.Untrack(delivery.ack_token());
      return;
    }
    queue_.push_back(Work{std::move(delivery)});
  }

  // Deliveries not started will be redelivered by the server once the
  // stream ends: stop holding their leases.
  void DropQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    dropped_ += queue_.size();
    for (const Work& w : queue_) leases_.Untrack(w.delivery.ack_token());
    queue_.clear();
  }

  void WorkLoop() {
    while (true) {
      Work work;
      {
        absl::MutexLock lock(&mu_);
        const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      Handle(work.delivery);
    }
  }

  void Handle(const v1::Delivery& delivery) {
    absl::Status result;
    try {
      result = handler_(delivery);
    } catch (const std::exception& e) {
      result = absl::InternalError(absl::StrCat("handler threw: ", e.what()));
    } catch (...) {
      result = absl::InternalError("handler threw a non-std exception");
    }
    leases_.Untrack(delivery.ack_token());
    if (result.ok()) {
      ++handled_ok_;
      acks_.Add(delivery.ack_token());
      return;
    }
    ++handler_errors_;
    const NackPlan plan = NackPlanOf(result);
    std::string reason = absl::StrCat(absl::StatusCodeToString(result.code()),
                                      ": ", result.message());
    if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
    absl::StatusOr<v1::Job> nacked = client_->Nack(
        delivery.ack_token(), plan.retry_after, reason, plan.dead_letter);
    if (nacked.ok()) {
      ++nacks_;
    } else {
      ++nack_failures_;
      ReportError(absl::Status(
          nacked.status().code(),
          absl::StrCat("Nack failed: ", nacked.status().message())));
    }
  }

  void ReportError(const absl::Status& s) {
    if (options_.on_error) options_.on_error(s);
  }

  Client* const client_;
  const SubscriberOptions options_;
  const Handler handler_;

  std::atomic<uint64_t> streams_opened_{0};
  std::atomic<uint64_t> deliveries_{0};
  std::atomic<uint64_t> handled_ok_{0};
  std::atomic<uint64_t> handler_errors_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> nacks_{0};
  std::atomic<uint64_t> nack_failures_{0};

  mutable absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  DeliveryStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status status_ ABSL_GUARDED_BY(mu_);

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;

  // Declared last: their threads call back into the members above.
  AckBatcher acks_;
  LeaseKeeper leases_;
  std::thread reader_;
  std::vector<std::thread> workers_;
};

absl::StatusOr<std::unique_ptr<Subscriber>> Subscriber::Start(
    Client* client, SubscriberOptions options, Handler handler) {
  if (client == nullptr) return absl::InvalidArgumentError("client: required");
  if (absl::Status s = Validate(options, handler); !s.ok()) return s;
  return std::unique_ptr<Subscriber>(new Subscriber(
      std::make_unique<Impl>(client, std::move(options), std::move(handler))));
}

Subscriber::Subscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Subscriber::~Subscriber() { impl_->Stop(); }

void Subscriber::Stop() { impl_->Stop(); }

SubscriberStats Subscriber::stats() const { return impl_->stats(); }

absl::Status Subscriber::status() const { return impl_->status(); }

}  // namespace delayd::client
