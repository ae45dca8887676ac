// Deliverer: subscribers, the delivery thread and Dispatch. The ends of
// leases are in deliverer_leases.cc, Ack/Nack/ExtendLease in deliverer_rpcs.cc.
#include "server/delivery/deliverer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "delayd/proto_time.h"
#include "server/base/log.h"
#include "server/delivery/ack_token.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {
namespace {

using storage::JobRecord;
using storage::Mutation;
using storage::TimestampToUnixMs;
using storage::UnixMsToTimestamp;

// Jobs taken off a ready queue per dispatch round: one store read and one
// write each. Other topics and tasks get their turn between rounds.
constexpr size_t kDispatchChunk = 256;
constexpr size_t kMaxConsumerBytes = 128;

}  // namespace

Deliverer::Deliverer(const Deps& deps)
    : d_(deps), rng_(std::random_device{}()) {}

Deliverer::~Deliverer() { Stop(); }

void Deliverer::Start() { thread_ = std::thread(&Deliverer::Loop, this); }

void Deliverer::Stop() {
  {
    absl::MutexLock lock(&work_mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Deliverer::Loop() {
  while (true) {
    std::function<void()> task;
    std::string topic;
    {
      absl::MutexLock lock(&work_mu_);
      work_mu_.Await(absl::Condition(
          +[](Deliverer* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->work_mu_) {
            return d->stop_ || !d->tasks_.empty() || !d->dirty_order_.empty();
          },
          this));
      if (stop_) return;
      busy_ = true;
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
      } else {
        topic = std::move(dirty_order_.front());
        dirty_order_.pop_front();
        dirty_.erase(topic);
      }
    }
    if (task) {
      task();
    } else {
      Dispatch(topic);
    }
    absl::MutexLock lock(&work_mu_);
    busy_ = false;
  }
}

bool Deliverer::IdleForTesting() {
  absl::MutexLock lock(&work_mu_);
  return !busy_ && tasks_.empty() && dirty_order_.empty();
}

void Deliverer::RunTask(std::function<void()> task) {
  absl::MutexLock lock(&work_mu_);
  tasks_.push_back(std::move(task));
}

void Deliverer::Kick(absl::string_view topic) {
  absl::MutexLock lock(&work_mu_);
  if (dirty_.emplace(topic).second) dirty_order_.emplace_back(topic);
}

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
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("server is shutting down");
    id = next_subscriber_++;
    Subscriber& sub = subscribers_[id];
    sub.id = id;
    sub.topic = req.topic();
    sub.consumer = req.consumer();
    sub.max_in_flight = req.max_in_flight() == 0 ? d_.limits->default_in_flight
                                                 : req.max_in_flight();
    sub.sink = std::move(sink);
    topic_subscribers_[req.topic()].ids.push_back(id);
  }
  d_.topics->AddSubscribers(req.topic(), 1);
  Kick(req.topic());
  return id;
}

void Deliverer::Unsubscribe(uint64_t subscriber, absl::string_view reason) {
  std::vector<JobKey> keys;
  std::string topic;
  {
    absl::MutexLock lock(&mu_);
    auto it = subscribers_.find(subscriber);
    if (it == subscribers_.end()) return;
    Subscriber& sub = it->second;
    topic = sub.topic;
    auto t = topic_subscribers_.find(topic);
    std::vector<uint64_t>& ids = t->second.ids;
    ids.erase(std::find(ids.begin(), ids.end(), subscriber));
    if (ids.empty()) {
      topic_subscribers_.erase(t);
    } else {
      t->second.cursor %= ids.size();
    }
    // Its leases stay (an ack may still come) until the release below.
    for (const JobKey& key : sub.leased) {
      leases_.at(key).subscriber = 0;
      keys.push_back(key);
    }
    subscribers_.erase(it);
  }
  d_.topics->AddSubscribers(topic, -1);
  if (keys.empty()) return;
  RunTask([this, keys = std::move(keys), reason = std::string(reason)] {
    for (size_t begin = 0; begin < keys.size(); begin += kDispatchChunk) {
      const size_t end = std::min(keys.size(), begin + kDispatchChunk);
      ReleaseLeases(
          std::vector<JobKey>(keys.begin() + begin, keys.begin() + end), {},
          reason);
    }
  });
}

void Deliverer::CloseAll(const absl::Status& status) {
  std::vector<std::shared_ptr<DeliverySink>> sinks;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (const auto& [id, sub] : subscribers_) sinks.push_back(sub.sink);
  }
  for (const auto& sink : sinks) sink->Close(status);
}

std::vector<uint64_t> Deliverer::ReserveLocked(const std::string& topic,
                                               size_t max) {
  std::vector<uint64_t> slots;
  auto it = topic_subscribers_.find(topic);
  if (closed_ || it == topic_subscribers_.end()) return slots;
  TopicSubscribers& t = it->second;
  const size_t n = t.ids.size();
  // Round-robin over those with free credit; stop after a full turn finds
  // none.
  for (size_t idle = 0; slots.size() < max && idle < n;) {
    Subscriber& sub = subscribers_.at(t.ids[t.cursor]);
    t.cursor = (t.cursor + 1) % n;
    if (sub.in_flight < sub.max_in_flight) {
      ++sub.in_flight;
      slots.push_back(sub.id);
      idle = 0;
    } else {
      ++idle;
    }
  }
  return slots;
}

void Deliverer::UnreserveLocked(uint64_t subscriber) {
  auto it = subscribers_.find(subscriber);
  if (it != subscribers_.end()) --it->second.in_flight;
}

uint64_t Deliverer::NewNonceLocked() {
  uint64_t nonce;
  do {
    nonce = rng_();
  } while (nonce == 0);  // 0 means "never delivered" in the record
  return nonce;
}

void Deliverer::AddLeaseLocked(const JobKey& key, Lease lease) {
  lease.seq = next_lease_seq_++;
  lease.timer = d_.scheduler->Add(lease.deadline_ms, kLeaseTagBit | lease.seq);
  lease_keys_[lease.seq] = key;
  if (lease.subscriber != 0) {
    subscribers_.at(lease.subscriber).leased.insert(key);
  }
  leases_[key] = lease;
}

void Deliverer::RemoveLeaseLocked(const JobKey& key,
                                  std::vector<std::string>& kick) {
  auto it = leases_.find(key);
  if (it == leases_.end()) return;
  const Lease& lease = it->second;
  d_.scheduler->Cancel(lease.timer);
  lease_keys_.erase(lease.seq);
  if (!lease.canceled) d_.topics->AddInFlight(key.topic, -1);
  if (lease.subscriber != 0) {
    if (auto sub = subscribers_.find(lease.subscriber);
        sub != subscribers_.end()) {
      --sub->second.in_flight;
      sub->second.leased.erase(key);
      kick.push_back(key.topic);
    }
  }
  leases_.erase(it);
}

void Deliverer::Dispatch(const std::string& topic) {
  std::vector<uint64_t> slots;
  {
    absl::MutexLock lock(&mu_);
    slots = ReserveLocked(topic, kDispatchChunk);
  }
  if (slots.empty()) return;
  const std::vector<std::string> ids = d_.topics->PopReady(topic, slots.size());
  if (ids.size() == slots.size()) Kick(topic);  // there may be more
  std::vector<uint64_t> hashes;
  std::vector<storage::JobKeyView> keys;
  for (const std::string& id : ids) {
    hashes.push_back(KeyHash(topic, id));
    keys.push_back({topic, id});
  }
  struct Send {
    std::shared_ptr<DeliverySink> sink;
    v1::Delivery delivery;
  };
  std::vector<Send> sends;
  bool backoff = false;
  {
    KeyLocks::Guard guard(*d_.locks, hashes);
    absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
        ids.empty() ? std::vector<std::optional<JobRecord>>()
                    : d_.store->MultiGet(keys);
    if (!stored.ok()) {
      DELAYD_LOG_ERROR("dispatch %s: cannot read jobs: %s", topic,
                       stored.status().ToString());
    }
    const int64_t now_ms = d_.clock->NowMs();
    std::vector<size_t> picked;  // index into ids
    std::vector<Mutation> mutations;
    if (stored.ok()) {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < ids.size(); ++i) {
        std::optional<JobRecord>& old = (*stored)[i];
        if (!old.has_value()) continue;  // gone since it fell due
        const v1::Job& job = old->job();
        const v1::JobState state = job.state();
        if (state == v1::JOB_STATE_IN_FLIGHT) {
          // Leased: not ready (it was queued twice). Without a lease: a
          // delivery of an earlier process, as good as READY.
          if (leases_.contains(JobKey{topic, ids[i]})) continue;
        } else if (state != v1::JOB_STATE_SCHEDULED &&
                   state != v1::JOB_STATE_READY) {
          continue;  // canceled in flight, dead: not deliverable
        }
        const int64_t due_ms = TimestampToUnixMs(job.fire_at());
        if (due_ms > now_ms) {
          // Moved later, or the wall clock stepped back since it fired:
          // never early. Its timer fires again at the due time.
          d_.timers->Arm(hashes[i], KeyCheck(topic, ids[i]), due_ms);
          continue;
        }
        // The record is read for this put only: change it in place.
        const std::optional<int64_t> due_entry = storage::DueIndexEntryOf(*old);
        JobRecord record = *std::move(old);
        v1::Job& next = *record.mutable_job();
        next.set_state(v1::JOB_STATE_IN_FLIGHT);
        next.set_attempts(next.attempts() + 1);
        *next.mutable_updated_at() = UnixMsToTimestamp(now_ms);
        record.set_delivery_nonce(NewNonceLocked());
        record.set_lease_expires_at_ms(now_ms +
                                       DurationMs(next.retry().lease()));
        mutations.push_back(Mutation::Put(std::move(record), due_entry));
        picked.push_back(i);
      }
    }
    absl::Status written =
        stored.ok() ? d_.store->Apply(mutations, storage::Durability::kNoSync)
                    : stored.status();
    if (!written.ok()) {
      DELAYD_LOG_ERROR("dispatch %s: cannot write %d leases: %s", topic,
                       mutations.size(), written.ToString());
      picked.clear();
      mutations.clear();
    }
    std::vector<std::string> orphans;
    {
      absl::MutexLock lock(&mu_);
      for (size_t k = 0; k < picked.size(); ++k) {
        const std::string& id = ids[picked[k]];
        const JobRecord& record = mutations[k].record();
        auto sub = subscribers_.find(slots[k]);
        if (sub == subscribers_.end()) {
          // Its stream ended meanwhile: IN_FLIGHT without a lease, which
          // the next round takes as READY.
          orphans.push_back(id);
          continue;
        }
        const JobKey key{topic, id};
        AddLeaseLocked(
            key,
            Lease{sub->first, record.delivery_nonce(), record.job().attempts(),
                  record.lease_expires_at_ms(), 0, timer::TimerHandle(), false,
                  *mutations[k].new_due_ms()});
        Send& send = sends.emplace_back();
        send.sink = sub->second.sink;
        send.delivery.set_ack_token(EncodeAckToken(
            {topic, id, record.job().attempts(), record.delivery_nonce()}));
        send.delivery.set_attempt(record.job().attempts());
        *send.delivery.mutable_lease_expires_at() =
            UnixMsToTimestamp(record.lease_expires_at_ms());
        // Written: the mutation's job is needed no more (IN_FLIGHT is shown
        // as stored, so PresentJob would copy it unchanged).
        send.delivery.mutable_job()->Swap(
            mutations[k].mutable_record().mutable_job());
      }
      // Credit reserved for nobody (jobs gone, not due, orphaned) returns.
      for (size_t k = picked.size(); k < slots.size(); ++k) {
        UnreserveLocked(slots[k]);
      }
    }
    d_.topics->AddInFlight(topic, static_cast<int64_t>(sends.size()));
    if (!written.ok()) {
      for (const std::string& id : ids) d_.topics->PushReady(topic, id);
      backoff = true;
    }
    for (const std::string& id : orphans) d_.topics->PushReady(topic, id);
    if (!orphans.empty() || backoff) Kick(topic);
  }
  if (backoff) {
    // Try again shortly rather than spin on a failing store (this is the
    // delivery thread, not a gRPC callback).
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (sends.empty()) return;
  const DeliveryMetrics::Topic& metrics = d_.metrics->For(topic);
  int64_t redelivered = 0;
  for (Send& send : sends) {
    const int64_t due_us =
        TimestampToUnixMs(send.delivery.job().fire_at()) * 1000;
    if (send.delivery.attempt() > 1) ++redelivered;
    send.sink->Send(std::move(send.delivery));
    d_.metrics->ObserveLateness(
        static_cast<double>(d_.clock->NowUs() - due_us) / 1e6);
  }
  metrics.delivered->Increment(static_cast<double>(sends.size()));
  if (redelivered > 0) {
    metrics.redelivered->Increment(static_cast<double>(redelivered));
  }
}

bool Deliverer::HasLease(absl::string_view topic, absl::string_view id) {
  absl::MutexLock lock(&mu_);
  return leases_.contains(JobKey{std::string(topic), std::string(id)});
}

void Deliverer::OnCanceledInFlight(absl::string_view topic,
                                   absl::string_view id) {
  JobKey key{std::string(topic), std::string(id)};
  {
    absl::MutexLock lock(&mu_);
    if (auto it = leases_.find(key); it != leases_.end()) {
      if (!it->second.canceled) {
        it->second.canceled = true;
        d_.topics->AddInFlight(topic, -1);
      }
      return;
    }
  }
  RemoveLeftoverCanceled({std::move(key)});
}

void Deliverer::DropLease(absl::string_view topic, absl::string_view id) {
  std::vector<std::string> kick;
  {
    absl::MutexLock lock(&mu_);
    RemoveLeaseLocked(JobKey{std::string(topic), std::string(id)}, kick);
  }
  for (const std::string& t : kick) Kick(t);
}

void Deliverer::RemoveLeftoverCanceled(std::vector<JobKey> keys) {
  if (keys.empty()) return;
  RunTask([this, keys = std::move(keys)] { DeleteLeftoverCanceled(keys); });
}

}  // namespace delayd::server
