// SubscriberSet: the open Subscribe streams, per topic in round-robin order,
// each with its credit (max_in_flight) and the keys it holds leases of.
// Reserve hands out credit round-robin over a topic's subscribers that have
// some free, so subscribers share a topic evenly and a slow one (out of
// credit) holds back nobody. A subscriber whose sink holds max_in_flight
// unwritten deliveries (its client stopped reading) has no free credit
// either, even when the leases of those deliveries have ended.
//
// Invariants: a subscriber's in_flight counts its leases plus the credit
// reserved for it and not yet used or given back, and never passes
// max_in_flight. Every id in a topic's order is a subscriber of that topic.
//
// Thread-compatible: Deliverer guards it with DeliveryState::mu.
#ifndef DELAYD_SERVER_DELIVERY_SUBSCRIBER_SET_H_
#define DELAYD_SERVER_DELIVERY_SUBSCRIBER_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "server/delivery/delivery_sink.h"
#include "server/jobs/job_key.h"

namespace delayd::server {

class SubscriberSet {
 public:
  struct Subscriber {
    uint64_t id;
    std::string topic;
    std::string consumer;
    uint32_t max_in_flight;
    uint32_t in_flight = 0;  // leases held, plus credit reserved
    std::shared_ptr<DeliverySink> sink;
    absl::flat_hash_set<JobKey> leased;
  };

  SubscriberSet() = default;
  SubscriberSet(const SubscriberSet&) = delete;
  SubscriberSet& operator=(const SubscriberSet&) = delete;

  // Adds a subscriber of `topic` last in its round-robin order; returns its
  // id (never 0).
  uint64_t Add(const std::string& topic, const std::string& consumer,
               uint32_t max_in_flight, std::shared_ptr<DeliverySink> sink);
  // Removes a subscriber and returns it (with the keys it holds leases
  // of); nullopt for an unknown id.
  std::optional<Subscriber> Remove(uint64_t id);
  // nullptr for an unknown id.
  Subscriber* Find(uint64_t id);

  // Reserves up to `max` credits round-robin over the topic's subscribers
  // with free credit (room under max_in_flight for both their leases and
  // their sink's unwritten deliveries); one subscriber id per credit. Each
  // turn takes up to `per_turn` credits of one subscriber, kept together:
  // 1 (or 0) splits a round evenly, more makes fewer, larger sends. None
  // once Close()d.
  std::vector<uint64_t> Reserve(const std::string& topic, size_t max,
                                size_t per_turn = 1);
  // Gives back the credits of a Reserve(topic) that were not used: `unused`
  // is the tail of the reserved slots, in order (ids no longer known are
  // ignored). The round-robin goes on from the first of them, so a
  // reservation larger than the work it found moves the turn only by what
  // was used.
  void GiveBack(const std::string& topic, absl::Span<const uint64_t> unused);
  // Per topic with subscribers, the deliveries their sinks hold unwritten.
  absl::flat_hash_map<std::string, size_t> UnwrittenByTopic() const;
  // A lease of `key` starts on a credit reserved for `id`. REQUIRES: `id`
  // known.
  void AttachLease(uint64_t id, const JobKey& key);
  // A lease of `key` held by `id` ended: its credit returns. Returns false
  // when `id` is gone (its credit went with it).
  bool DetachLease(uint64_t id, const JobKey& key);

  // Refuses further credit (Reserve) from now on; returns every sink, to be
  // closed.
  std::vector<std::shared_ptr<DeliverySink>> Close();
  bool closed() const { return closed_; }

 private:
  struct TopicOrder {
    std::vector<uint64_t> ids;  // round-robin order
    size_t cursor = 0;
  };

  bool closed_ = false;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, Subscriber> subscribers_;
  absl::flat_hash_map<std::string, TopicOrder> topics_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_DELIVERY_SUBSCRIBER_SET_H_
