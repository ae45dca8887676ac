#include "server/jobs/topic_table.h"

#include <algorithm>

namespace delayd::server {

TopicTable::Topic& TopicTable::GetLocked(absl::string_view topic) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) it = topics_.try_emplace(std::string(topic)).first;
  return it->second;
}

void TopicTable::AddLive(absl::string_view topic, int64_t jobs,
                         int64_t payload_bytes) {
  absl::MutexLock lock(&mu_);
  Counts& counts = GetLocked(topic).counts;
  counts.live += jobs;
  counts.live_payload_bytes += payload_bytes;
}

void TopicTable::AddDead(absl::string_view topic, int64_t delta) {
  absl::MutexLock lock(&mu_);
  GetLocked(topic).counts.dead += delta;
}

void TopicTable::AddDone(absl::string_view topic, int64_t delta) {
  absl::MutexLock lock(&mu_);
  GetLocked(topic).counts.done += delta;
}

void TopicTable::AddCanceled(absl::string_view topic, int64_t delta) {
  absl::MutexLock lock(&mu_);
  GetLocked(topic).counts.canceled += delta;
}

void TopicTable::AddInFlight(absl::string_view topic, int64_t delta) {
  absl::MutexLock lock(&mu_);
  GetLocked(topic).counts.in_flight += delta;
}

void TopicTable::AddSubscribers(absl::string_view topic, int64_t delta) {
  absl::MutexLock lock(&mu_);
  GetLocked(topic).counts.subscribers += delta;
}

bool TopicTable::IsLiveEntry(const Topic& t, const std::string& entry) {
  auto it = t.ready_set.find(absl::string_view(entry));
  return it != t.ready_set.end() && it->data() == entry.data();
}

bool TopicTable::PushReady(absl::string_view topic, absl::string_view id) {
  return PushReadyBatch(topic, std::span<const absl::string_view>(&id, 1)) == 1;
}

int64_t TopicTable::PushReadyBatch(absl::string_view topic,
                                   std::span<const absl::string_view> ids) {
  absl::MutexLock lock(&mu_);
  Topic& t = GetLocked(topic);
  int64_t queued = 0;
  for (absl::string_view id : ids) {
    if (t.ready_set.contains(id)) continue;
    const std::string& entry = t.ready_order.emplace_back(id);
    t.ready_set.insert(absl::string_view(entry));
    ++queued;
  }
  t.counts.ready += queued;
  return queued;
}

bool TopicTable::RemoveReady(absl::string_view topic, absl::string_view id) {
  return RemoveReadyBatch(topic, std::span<const absl::string_view>(&id, 1)) ==
         1;
}

int64_t TopicTable::RemoveReadyBatch(absl::string_view topic,
                                     std::span<const absl::string_view> ids) {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return 0;
  Topic& t = it->second;
  if (t.ready_set.empty()) return 0;
  int64_t removed = 0;
  for (absl::string_view id : ids) removed += t.ready_set.erase(id);
  if (removed == 0) return 0;
  t.counts.ready -= removed;
  // Trim removed ids off the front so the queue does not grow without bound.
  while (!t.ready_order.empty() && !IsLiveEntry(t, t.ready_order.front())) {
    t.ready_order.pop_front();
  }
  return removed;
}

std::vector<std::string> TopicTable::PopReady(absl::string_view topic,
                                              size_t max) {
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return out;
  Topic& t = it->second;
  out.reserve(std::min<size_t>(max, t.ready_set.size()));
  while (out.size() < max && !t.ready_order.empty()) {
    std::string& entry = t.ready_order.front();
    // Entries removed (or queued again further back) are skipped.
    if (IsLiveEntry(t, entry)) {
      // The view goes before the entry it points to.
      t.ready_set.erase(absl::string_view(entry));
      --t.counts.ready;
      out.push_back(std::move(entry));
    }
    t.ready_order.pop_front();
  }
  return out;
}

TopicTable::Counts TopicTable::CountsOf(absl::string_view topic) const {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  return it == topics_.end() ? Counts{} : it->second.counts;
}

std::vector<std::string> TopicTable::Topics() const {
  std::vector<std::string> out;
  {
    absl::MutexLock lock(&mu_);
    out.reserve(topics_.size());
    for (const auto& [name, topic] : topics_) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TopicTable::Live TopicTable::LiveWhere(
    absl::FunctionRef<bool(absl::string_view)> matches) const {
  absl::MutexLock lock(&mu_);
  Live live;
  for (const auto& [name, topic] : topics_) {
    if (matches(name)) {
      live.jobs += topic.counts.live;
      live.payload_bytes += topic.counts.live_payload_bytes;
    }
  }
  return live;
}

}  // namespace delayd::server
