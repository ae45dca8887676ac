#include "server/delivery/subscriber_set.h"

#include <algorithm>
#include <utility>

namespace delayd::server {

uint64_t SubscriberSet::Add(const std::string& topic,
                            const std::string& consumer, uint32_t max_in_flight,
                            std::shared_ptr<DeliverySink> sink) {
  const uint64_t id = next_id_++;
  Subscriber& sub = subscribers_[id];
  sub.id = id;
  sub.topic = topic;
  sub.consumer = consumer;
  sub.max_in_flight = max_in_flight;
  sub.sink = std::move(sink);
  topics_[topic].ids.push_back(id);
  return id;
}

std::optional<SubscriberSet::Subscriber> SubscriberSet::Remove(uint64_t id) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return std::nullopt;
  auto t = topics_.find(it->second.topic);
  std::vector<uint64_t>& ids = t->second.ids;
  ids.erase(std::find(ids.begin(), ids.end(), id));
  if (ids.empty()) {
    topics_.erase(t);
  } else {
    t->second.cursor %= ids.size();
  }
  std::optional<Subscriber> removed(std::move(it->second));
  subscribers_.erase(it);
  return removed;
}

SubscriberSet::Subscriber* SubscriberSet::Find(uint64_t id) {
  auto it = subscribers_.find(id);
  return it == subscribers_.end() ? nullptr : &it->second;
}

std::vector<uint64_t> SubscriberSet::Reserve(const std::string& topic,
                                             size_t max, size_t per_turn) {
  std::vector<uint64_t> slots;
  auto it = topics_.find(topic);
  if (closed_ || it == topics_.end()) return slots;
  TopicOrder& t = it->second;
  const size_t n = t.ids.size();
  // Each subscriber's room: its credit less the larger of its leases and
  // its unwritten deliveries (a stream that does not drain gets nothing).
  std::vector<uint32_t> room(n);
  for (size_t i = 0; i < n; ++i) {
    const Subscriber& sub = subscribers_.at(t.ids[i]);
    const size_t used = std::max<size_t>(sub.in_flight, sub.sink->Unwritten());
    room[i] = used < sub.max_in_flight
                  ? static_cast<uint32_t>(sub.max_in_flight - used)
                  : 0;
  }
  // Round-robin over those with room; stop after a full turn finds none.
  for (size_t idle = 0; slots.size() < max && idle < n;) {
    const size_t i = t.cursor;
    t.cursor = (t.cursor + 1) % n;
    if (room[i] > 0) {
      const size_t take = std::min(
          {size_t{room[i]}, max - slots.size(), std::max<size_t>(per_turn, 1)});
      room[i] -= static_cast<uint32_t>(take);
      Subscriber& sub = subscribers_.at(t.ids[i]);
      sub.in_flight += static_cast<uint32_t>(take);
      slots.insert(slots.end(), take, sub.id);
      idle = 0;
    } else {
      ++idle;
    }
  }
  return slots;
}

void SubscriberSet::GiveBack(const std::string& topic,
                             absl::Span<const uint64_t> unused) {
  if (unused.empty()) return;
  for (uint64_t id : unused) {
    if (Subscriber* sub = Find(id); sub != nullptr) --sub->in_flight;
  }
  auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  TopicOrder& t = it->second;
  auto first = std::find(t.ids.begin(), t.ids.end(), unused.front());
  if (first != t.ids.end()) {
    t.cursor = static_cast<size_t>(first - t.ids.begin());
  }
}

absl::flat_hash_map<std::string, size_t> SubscriberSet::UnwrittenByTopic()
    const {
  absl::flat_hash_map<std::string, size_t> unwritten;
  for (const auto& [id, sub] : subscribers_) {
    unwritten[sub.topic] += sub.sink->Unwritten();
  }
  return unwritten;
}

void SubscriberSet::AttachLease(uint64_t id, const JobKey& key) {
  subscribers_.at(id).leased.insert(key);
}

bool SubscriberSet::DetachLease(uint64_t id, const JobKey& key) {
  Subscriber* sub = Find(id);
  if (sub == nullptr) return false;
  --sub->in_flight;
  sub->leased.erase(key);
  return true;
}

std::vector<std::shared_ptr<DeliverySink>> SubscriberSet::Close() {
  closed_ = true;
  std::vector<std::shared_ptr<DeliverySink>> sinks;
  for (const auto& [id, sub] : subscribers_) sinks.push_back(sub.sink);
  return sinks;
}

}  // namespace delayd::server
