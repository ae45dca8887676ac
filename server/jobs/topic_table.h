// TopicTable: what the server keeps in memory per topic — how many live jobs
// it has, the READY jobs waiting for a subscriber (in the order they fell
// due), and how many are DEAD, DONE and CANCELED (records kept without a due
// entry; TerminalStateCounter keeps these three right across a restart). Only
// READY jobs cost their key strings here; SCHEDULED ones are counted, not held.
//
// The counts are exact for this process's view: a job counts as ready from
// the moment its timer fired until it is taken for delivery (PopReady),
// canceled or moved; as in flight while a subscriber holds its lease (and it
// was not canceled); as scheduled while live and neither. Subscribers are
// the open Subscribe streams of the topic.
// Thread-safe.
#ifndef DELAYD_SERVER_JOBS_TOPIC_TABLE_H_
#define DELAYD_SERVER_JOBS_TOPIC_TABLE_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/base/huge_page_allocator.h"

namespace delayd::server {

class TopicTable {
 public:
  struct Counts {
    int64_t live = 0;  // SCHEDULED + READY + IN_FLIGHT
    // The payload bytes of the live jobs.
    int64_t live_payload_bytes = 0;
    int64_t ready = 0;
    int64_t in_flight = 0;
    int64_t dead = 0;
    // Records kept in state DONE (acked, under --retention) and CANCELED
    // (canceled in flight until the delivery ends, or under --retention).
    int64_t done = 0;
    int64_t canceled = 0;
    int64_t subscribers = 0;
    int64_t scheduled() const { return live - ready - in_flight; }
  };

  TopicTable() = default;
  TopicTable(const TopicTable&) = delete;
  TopicTable& operator=(const TopicTable&) = delete;

  // Jobs of `topic` became live (jobs > 0) or stopped being live (jobs < 0),
  // and the payload bytes of its live jobs changed by payload_bytes.
  void AddLive(absl::string_view topic, int64_t jobs, int64_t payload_bytes);
  void AddDead(absl::string_view topic, int64_t delta);
  void AddDone(absl::string_view topic, int64_t delta);
  void AddCanceled(absl::string_view topic, int64_t delta);
  void AddInFlight(absl::string_view topic, int64_t delta);
  void AddSubscribers(absl::string_view topic, int64_t delta);

  // Queues a due job; false if it was already queued.
  bool PushReady(absl::string_view topic, absl::string_view id);
  // PushReady of each of a topic's ids, in order, under one lock. Returns
  // how many were queued.
  int64_t PushReadyBatch(absl::string_view topic,
                         std::span<const absl::string_view> ids);
  // Drops a job from the ready queue (canceled, moved); false if absent.
  bool RemoveReady(absl::string_view topic, absl::string_view id);
  // RemoveReady of each of a topic's ids, under one lock. Returns how many
  // were queued.
  int64_t RemoveReadyBatch(absl::string_view topic,
                           std::span<const absl::string_view> ids);
  // Takes up to `max` ready jobs off the front of the queue, in due order;
  // they stop counting as ready.
  std::vector<std::string> PopReady(absl::string_view topic, size_t max);

  Counts CountsOf(absl::string_view topic) const;
  // The live jobs of every topic `matches` takes, and their payload bytes.
  // O(topics).
  struct Live {
    int64_t jobs = 0;
    int64_t payload_bytes = 0;
  };
  Live LiveWhere(absl::FunctionRef<bool(absl::string_view)> matches) const;
  // Every topic the table knows, sorted.
  std::vector<std::string> Topics() const;

 private:
  struct Topic {
    Counts counts;
    // Ready ids in due order. Each id is stored once, here; ready_set views
    // the queued entry of each ready id. An entry no view points to (its id
    // was removed, or removed and queued again further back) is skipped,
    // and dropped, when it reaches the front. A deque never moves its
    // elements when it grows or shrinks at its ends, nor when it is moved
    // (as topics_ does when it grows), so the views stay valid.
    std::deque<std::string> ready_order;
    // On huge pages: a herd makes it a million entries, probed at random.
    HugePageHashSet<absl::string_view> ready_set;
  };
  Topic& GetLocked(absl::string_view topic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `entry`, an entry of t.ready_order, is the one its id's view
  // points to (the id is ready, and queued there).
  static bool IsLiveEntry(const Topic& t, const std::string& entry);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Topic> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_TOPIC_TABLE_H_
