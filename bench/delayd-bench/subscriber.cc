#include "bench/delayd-bench/subscriber.h"

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "bench/delayd-bench/common.h"
#include "google/protobuf/arena.h"

namespace delayd::bench {

Tally::Tally(int64_t jobs, size_t id_prefix_len, std::vector<int64_t> offsets)
    : id_prefix_len(id_prefix_len),
      offsets(std::move(offsets)),
      lateness_ms(static_cast<size_t>(jobs), NAN),
      received_ms(static_cast<size_t>(jobs), NAN),
      seen(new std::atomic<uint8_t>[static_cast<size_t>(jobs)]) {
  for (int64_t i = 0; i < jobs; ++i) seen[i].store(0);
}

Subscriber::Subscriber(const Endpoint& endpoint, int channel_tag,
                       const std::string& topic, const std::string& consumer,
                       uint32_t max_in_flight, uint32_t max_batch, Tally* tally)
    : endpoint_(endpoint),
      stub_(v1::DelayQueue::NewStub(NewChannel(endpoint, channel_tag))),
      tally_(tally) {
  Authorize(endpoint_, &context_);
  request_.set_topic(topic);
  request_.set_consumer(consumer);
  request_.set_max_in_flight(max_in_flight);
  request_.set_max_batch(max_batch);
  reader_ = std::thread([this] { Read(); });
  acker_ = std::thread([this] { AckLoop(); });
}

Subscriber::~Subscriber() { Stop(0); }

void Subscriber::Stop(double timeout_ms) {
  if (!reader_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock,
                 std::chrono::microseconds(
                     static_cast<int64_t>(std::max(0.0, timeout_ms) * 1000)),
                 [this] { return to_ack_.empty() && !acking_; });
  }
  cancelled_ = true;
  context_.TryCancel();
  reader_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  acker_.join();
}

void Subscriber::Read() {
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader =
      stub_->Subscribe(&context_, request_);
  const int64_t jobs = static_cast<int64_t>(tally_->lateness_ms.size());
  // Each message is parsed into an arena, dropped whole after it: no
  // allocation or destructor per delivery once the first block is big
  // enough (a message of 1000 deliveries takes about 0.5 MiB).
  std::vector<char> first_block(1 << 20);
  google::protobuf::ArenaOptions options;
  options.initial_block = first_block.data();
  options.initial_block_size = first_block.size();
  while (true) {
    google::protobuf::Arena arena(options);
    v1::SubscribeResponse& message =
        *google::protobuf::Arena::CreateMessage<v1::SubscribeResponse>(&arena);
    if (!reader->Read(&message)) break;
    const double now = NowMs();
    if (first_recv_ms_ == 0) first_recv_ms_ = now;
    last_recv_ms_ = now;
    ++messages_;
    for (const v1::Delivery& delivery : message.deliveries()) {
      const v1::Job& job = delivery.job();
      ++deliveries_;
      const double fire_at_ms =
          job.fire_at().seconds() * 1e3 + job.fire_at().nanos() / 1e6;
      if (now < fire_at_ms) tally_->early.fetch_add(1);
      const int64_t due = PayloadDueMs(job.payload());
      // An occurrence of a recurring job counts as the job it came from.
      const int64_t index = JobIndex(
          job.has_occurrence_of() ? job.occurrence_of().id() : job.id(),
          tally_->id_prefix_len, tally_->offsets);
      const v1::OccurrenceOf& of = job.occurrence_of();
      const int64_t nominal = of.nominal_time().seconds() * 1000 +
                              of.nominal_time().nanos() / 1'000'000;
      if (due < 0 || index < 0 || index >= jobs) {
        tally_->foreign.fetch_add(1);
      } else if (job.has_occurrence_of() &&
                 nominal != due + tally_->occurrence_offset_ms) {
        tally_->other_occurrences.fetch_add(1);
      } else if (tally_->seen[index].exchange(1) != 0) {
        tally_->duplicates.fetch_add(1);
      } else {
        tally_->lateness_ms[index] =
            now - static_cast<double>(due + tally_->occurrence_offset_ms);
        tally_->received_ms[index] = now;
        tally_->received.fetch_add(1, std::memory_order_relaxed);
      }
    }
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake = to_ack_.empty();
      for (v1::Delivery& delivery : *message.mutable_deliveries()) {
        to_ack_.push_back(std::move(*delivery.mutable_ack_token()));
      }
    }
    if (wake) cv_.notify_all();
  }
  const grpc::Status status = reader->Finish();
  if (!cancelled_) {
    stream_error_ = status.ok() ? "stream ended by the server"
                                : std::to_string(status.error_code()) + ": " +
                                      status.error_message();
  }
  ended_ = true;
}

void Subscriber::AckLoop() {
  std::vector<std::string> tokens;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      acking_ = false;
      cv_.notify_all();  // Stop() may be waiting for the queue to drain
      cv_.wait(lock, [this] { return stop_ || !to_ack_.empty(); });
      if (to_ack_.empty()) return;  // stopping
      tokens.swap(to_ack_);
      acking_ = true;
    }
    for (size_t i = 0; i < tokens.size(); i += 1000) {
      v1::AckRequest request;
      const size_t end = std::min(tokens.size(), i + 1000);
      for (size_t k = i; k < end; ++k) {
        request.add_ack_tokens(std::move(tokens[k]));
      }
      grpc::ClientContext context;
      Authorize(endpoint_, &context);
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
      v1::AckResponse response;
      ++ack_calls_;
      const grpc::Status status = stub_->Ack(&context, request, &response);
      if (!status.ok()) {
        ack_errors_ += static_cast<int64_t>(end - i);
        continue;
      }
      for (const v1::AckResult& r : response.results()) {
        if (r.code() == 0) {
          ++acked_;
        } else {
          ++ack_errors_;
        }
      }
    }
    // A short pause after a small batch lets the next one fill up: fewer
    // Ack calls for the shared cores, at no cost to the lateness (stamped
    // on receipt) and a few more deliveries in flight.
    const bool small = tokens.size() < 1000;
    tokens.clear();
    if (small) SleepMs(1);
  }
}

}  // namespace delayd::bench
