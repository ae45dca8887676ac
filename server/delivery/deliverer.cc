#include "server/delivery/deliverer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/jobs/validation.h"

namespace delayd::server {
namespace {

constexpr size_t kMaxConsumerBytes = 128;
// SubscribeRequest.max_batch: 1..kMaxBatch, 0 meaning no limit.
constexpr uint32_t kMaxBatch = 10000;

}  // namespace

Deliverer::Deliverer(const Deps& deps)
    : d_(deps),
      state_(deps.scheduler, &deps.ledger->topics()),
      dispatcher_(deps, &state_, &loop_),
      loop_([this](const std::string& topic) { dispatcher_.Dispatch(topic); }),
      endings_(deps, &state_, &loop_),
      acks_(deps, &state_, &loop_, &endings_) {}

Deliverer::~Deliverer() { Stop(); }

absl::StatusOr<uint64_t> Deliverer::Subscribe(
    const v1::SubscribeRequest& req, std::shared_ptr<DeliverySink> sink) {
  if (absl::Status s = ValidateTopic("topic", req.topic(), *d_.limits);
      !s.ok()) {
    return s;
  }
  if (req.consumer().size() > kMaxConsumerBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("consumer: must be at most ", kMaxConsumerBytes,
                     " bytes, got ", req.consumer().size()));
  }
  if (req.max_in_flight() > d_.limits->max_in_flight) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_in_flight: must be 1-", d_.limits->max_in_flight, " (0 means ",
        d_.limits->default_in_flight, "), got ", req.max_in_flight()));
  }
  if (req.max_batch() > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch: must be 1-", kMaxBatch,
                     " (0 means no limit), got ", req.max_batch()));
  }
  uint64_t id;
  {
    absl::MutexLock lock(&state_.mu);
    if (state_.subscribers.closed()) {
      return absl::UnavailableError("server is shutting down");
    }
    id = state_.subscribers.Add(req.topic(), req.consumer(),
                                req.max_in_flight() == 0
                                    ? d_.limits->default_in_flight
                                    : req.max_in_flight(),
                                std::move(sink));
  }
  d_.ledger->topics().AddSubscribers(req.topic(), 1);
  Kick(req.topic());
  return id;
}

absl::flat_hash_map<std::string, size_t> Deliverer::UnwrittenByTopic() {
  absl::MutexLock lock(&state_.mu);
  return state_.subscribers.UnwrittenByTopic();
}

void Deliverer::Written(uint64_t subscriber) {
  std::string topic;
  {
    absl::MutexLock lock(&state_.mu);
    const SubscriberSet::Subscriber* sub = state_.subscribers.Find(subscriber);
    if (sub == nullptr) return;
    topic = sub->topic;
  }
  if (d_.ledger->topics().CountsOf(topic).ready > 0) loop_.Kick(topic);
}

void Deliverer::Unsubscribe(uint64_t subscriber, absl::string_view reason) {
  std::vector<JobKey> keys;
  std::string topic;
  {
    absl::MutexLock lock(&state_.mu);
    std::optional<SubscriberSet::Subscriber> sub =
        state_.subscribers.Remove(subscriber);
    if (!sub.has_value()) return;
    topic = std::move(sub->topic);
    // Its leases stay (an ack may still come) until the release below.
    for (const JobKey& key : sub->leased) {
      state_.leases.Find(key)->subscriber = 0;
      keys.push_back(key);
    }
  }
  d_.ledger->topics().AddSubscribers(topic, -1);
  if (keys.empty()) return;
  loop_.Run([this, keys = std::move(keys), reason = std::string(reason)] {
    for (size_t begin = 0; begin < keys.size(); begin += Dispatcher::kChunk) {
      const size_t end = std::min(keys.size(), begin + Dispatcher::kChunk);
      endings_.ReleaseLeases(
          std::vector<JobKey>(keys.begin() + begin, keys.begin() + end), {},
          reason);
    }
  });
}

void Deliverer::CloseAll(const absl::Status& status) {
  std::vector<std::shared_ptr<DeliverySink>> sinks;
  {
    absl::MutexLock lock(&state_.mu);
    sinks = state_.subscribers.Close();
  }
  for (const auto& sink : sinks) sink->Close(status);
}

void Deliverer::OnLeaseTimers(std::vector<uint64_t> tags) {
  loop_.Run([this, tags = std::move(tags)] { endings_.ExpireLeases(tags); });
}

void Deliverer::OnLeftoverRetryTimer() {
  loop_.Run([this] { endings_.RetryLeftoverCanceled(); });
}

void Deliverer::OverlayLeases(
    std::span<std::optional<storage::JobRecord>> records) {
  absl::MutexLock lock(&state_.mu);
  for (std::optional<storage::JobRecord>& record : records) {
    if (record.has_value()) state_.OverlayLeaseLocked(*record);
  }
}

bool Deliverer::HasLease(absl::string_view topic, absl::string_view id) {
  absl::MutexLock lock(&state_.mu);
  return state_.leases.Contains(JobKey{std::string(topic), std::string(id)});
}

void Deliverer::OnCanceledInFlight(absl::string_view topic,
                                   absl::string_view id) {
  JobKey key{std::string(topic), std::string(id)};
  {
    absl::MutexLock lock(&state_.mu);
    if (LeaseTable::Lease* lease = state_.leases.Find(key)) {
      if (!lease->canceled) {
        lease->canceled = true;
        d_.ledger->topics().AddInFlight(topic, -1);
      }
      return;
    }
  }
  RemoveLeftoverCanceled({std::move(key)});
}

void Deliverer::DropLease(absl::string_view topic, absl::string_view id) {
  std::vector<std::string> kick;
  {
    absl::MutexLock lock(&state_.mu);
    state_.EndLeaseLocked(JobKey{std::string(topic), std::string(id)}, kick);
  }
  for (const std::string& t : kick) Kick(t);
}

void Deliverer::RemoveLeftoverCanceled(std::vector<JobKey> keys) {
  if (keys.empty()) return;
  loop_.Run([this, keys = std::move(keys)] {
    endings_.DeleteLeftoverCanceled(keys);
  });
}

}  // namespace delayd::server
