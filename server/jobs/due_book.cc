#include "server/jobs/due_book.h"

#include <string>
#include <utility>
#include <vector>

namespace delayd::server {

int64_t DueBook::SecondOf(int64_t ms) {
  return ms >= 0 ? ms / 1000 : -((-(ms + 1)) / 1000) - 1;
}

void DueBook::AddTo(Map& map, int64_t second, int64_t n) {
  auto [it, added] = map.try_emplace(second, n);
  if (added) return;
  it->second += n;
  if (it->second == 0) map.erase(it);
}

void DueBook::AddLocked(absl::string_view topic, int64_t second, int64_t n) {
  AddTo(all_, second, n);
  auto it = topics_.find(topic);
  if (it == topics_.end()) it = topics_.try_emplace(std::string(topic)).first;
  Topic& t = it->second;
  AddTo(t.seconds, second, n);
  for (size_t k = 0; k < kCursors; ++k) {
    if (second < t.cursor[k]) t.below[k] += n;
  }
  // An empty topic keeps nothing: its cursors count nothing below them.
  if (t.seconds.empty()) topics_.erase(it);
}

void DueBook::Move(absl::string_view topic, std::optional<int64_t> from,
                   std::optional<int64_t> to) {
  if (from == to) return;  // also an attempt mark: the entry stays
  absl::MutexLock lock(&mu_);
  if (from.has_value()) AddLocked(topic, SecondOf(*from), -1);
  if (to.has_value()) AddLocked(topic, SecondOf(*to), 1);
}

void DueBook::MoveBatch(absl::string_view topic,
                        std::span<const Entries> moves) {
  // The entries removed and added, by second; a run of one second is added
  // once (an Ack of a herd's jobs removes a thousand from one second).
  std::vector<std::pair<int64_t, int64_t>> deltas;  // (second, n)
  for (const Entries& m : moves) {
    if (m.from == m.to) continue;  // also an attempt mark: the entry stays
    for (const auto& [at, n] :
         {std::pair(m.from, int64_t{-1}), std::pair(m.to, int64_t{1})}) {
      if (!at.has_value()) continue;
      const int64_t second = SecondOf(*at);
      if (!deltas.empty() && deltas.back().first == second) {
        deltas.back().second += n;
      } else {
        deltas.emplace_back(second, n);
      }
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [second, n] : deltas) {
    if (n != 0) AddLocked(topic, second, n);
  }
}

void DueBook::Add(absl::string_view topic, int64_t due_ms, int64_t n) {
  if (n == 0) return;
  absl::MutexLock lock(&mu_);
  AddLocked(topic, SecondOf(due_ms), n);
}

DueBook::Counts DueBook::Below(absl::string_view topic,
                               const Seconds& seconds) {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return Counts{};
  Topic& t = it->second;
  for (size_t k = 0; k < kCursors; ++k) {
    const int64_t from = t.cursor[k];
    const int64_t to = seconds[k];
    if (to == from) continue;
    // The entries in the seconds between the old cursor and the new.
    const int64_t lo = std::min(from, to);
    const int64_t hi = std::max(from, to);
    int64_t between = 0;
    for (auto e = t.seconds.lower_bound(lo);
         e != t.seconds.end() && e->first < hi; ++e) {
      between += e->second;
    }
    t.below[k] += to > from ? between : -between;
    t.cursor[k] = to;
  }
  return t.below;
}

void DueBook::Count(const Map& map, int64_t from_s, int64_t width_s,
                    std::vector<uint64_t>& buckets) {
  const int64_t end_s = from_s + width_s * static_cast<int64_t>(buckets.size());
  for (auto e = map.lower_bound(from_s); e != map.end() && e->first < end_s;
       ++e) {
    buckets[static_cast<size_t>((e->first - from_s) / width_s)] +=
        static_cast<uint64_t>(e->second);
  }
}

std::vector<uint64_t> DueBook::Histogram(absl::string_view topic,
                                         int64_t from_s, int64_t width_s,
                                         size_t n) const {
  std::vector<uint64_t> buckets(n);
  absl::MutexLock lock(&mu_);
  if (topic.empty()) {
    Count(all_, from_s, width_s, buckets);
  } else if (auto it = topics_.find(topic); it != topics_.end()) {
    Count(it->second.seconds, from_s, width_s, buckets);
  }
  return buckets;
}

int64_t DueBook::total() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [second, count] : all_) n += count;
  return n;
}

}  // namespace delayd::server
