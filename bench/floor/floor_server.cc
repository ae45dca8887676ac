// floor_server: the transport floor of delayd's delivery path. It serves
// just enough of delayd.v1.DelayQueue (Schedule, ScheduleBatch,
// ScheduleStream, Subscribe, Ack, GetStats, and grpc.health.v1) for
// `delayd-bench burst` and `herd` to run against it unchanged, with everything
// but gRPC taken away: jobs live in a mutex-guarded std::multimap per topic,
// one timer thread hands due jobs to subscribers round-robin within their
// max_in_flight credit, and the messages on the wire are the size delayd's are
// (the full job, an ack token of delayd's length, lease_expires_at). What
// delayd's delivery costs beyond this server's is delayd's own work.
//
// Left out on purpose: durability (no store, no WAL), validation (a request
// is taken as it comes), leases (no lease timers, no redelivery; a job whose
// stream ends unacked is simply gone), Nack/ExtendLease/Cancel and the query
// rpcs (UNIMPLEMENTED), ids made by the server, if_exists, retention.
//
// With --discard, Schedule, ScheduleBatch and ScheduleStream build the
// reply (the job as delayd shows it) and keep nothing: the floor of one
// unary Schedule, or of the client library's stream, parse and reply with
// nothing behind it (issue 18). Nothing is then delivered.
//
// Usage: floor_server [ADDRESS] [--discard]
//        (default 127.0.0.1:7600; runs until killed)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/floor/floor_job.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace delayd::floor {
namespace {

constexpr int64_t kNever = INT64_MAX;
constexpr int64_t kLeaseMs = 30'000;

// One Subscribe stream's write side, as server/rpc/subscribe_reactor.cc: one
// write outstanding, each write a message of as many queued deliveries as
// max_batch and 1 MiB allow, buffer_hint when more wait. Shared with the
// timer thread, which may Send after the stream ended: those are dropped.
// The reactor is touched only while a write is outstanding or before
// Finish, so never after OnDone.
class Stream {
 public:
  Stream(grpc::ServerWriteReactor<v1::SubscribeResponse>* reactor,
         uint32_t max_batch)
      : reactor_(reactor), max_batch_(max_batch == 0 ? SIZE_MAX : max_batch) {}

  void Send(std::vector<v1::Delivery> deliveries) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      for (v1::Delivery& d : deliveries) queue_.push_back(std::move(d));
      if (writing_) return;  // chained from WriteDone
      writing_ = true;
      FillLocked();
    }
    // No hint on the write that starts a run (as delayd): with one, the
    // first deliveries of a stream never reached the client here.
    Write(/*chained=*/false);
  }

  void Finish(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      status_ = status;
      if (writing_) return;
    }
    reactor_->Finish(status);
  }

  void WriteDone(bool ok) {
    grpc::Status finish;
    {
      absl::MutexLock lock(&mu_);
      message_.Clear();
      if (!ok && !finished_) {
        finished_ = true;
        status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
      }
      if (finished_) {
        writing_ = false;
        queue_.clear();
        finish = status_;
      } else if (!queue_.empty()) {
        FillLocked();
        finish = grpc::Status::OK;
      } else {
        writing_ = false;
        return;
      }
    }
    if (message_.deliveries_size() > 0) {
      Write(/*chained=*/true);
    } else {
      reactor_->Finish(finish);
    }
  }

 private:
  void FillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t bytes = 0;
    while (!queue_.empty() &&
           static_cast<size_t>(message_.deliveries_size()) < max_batch_) {
      const size_t size = queue_.front().ByteSizeLong() + 5;
      if (message_.deliveries_size() > 0 && bytes + size > (1u << 20)) break;
      bytes += size;
      *message_.add_deliveries() = std::move(queue_.front());
      queue_.pop_front();
    }
    more_ = !queue_.empty();
  }

  void Write(bool chained) {
    grpc::WriteOptions options;
    if (chained && more_) options.set_buffer_hint();
    reactor_->StartWrite(&message_, options);
  }

  grpc::ServerWriteReactor<v1::SubscribeResponse>* const reactor_;
  const size_t max_batch_;
  absl::Mutex mu_;
  std::deque<v1::Delivery> queue_ ABSL_GUARDED_BY(mu_);
  v1::SubscribeResponse message_;  // being written while writing_
  bool more_ = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// The jobs, subscribers and in-flight deliveries, and the timer thread that
// fires due jobs. Thread-safe.
class Queue {
 public:
  Queue() : timer_([this] { Run(); }) {}
  ~Queue() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    timer_.join();
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // The job as delayd would show it; queued for delivery when `keep`.
  v1::Job Add(const v1::JobSpec& spec, int64_t now_ms, bool keep) {
    v1::Job job = ReplyJob(spec, now_ms, kLeaseMs);
    if (!keep) return job;
    const int64_t due = ToMs(job.fire_at());
    absl::MutexLock lock(&mu_);
    topics_[spec.topic()].jobs.emplace(due, job);
    if (due < next_wake_) kick_ = true;
    return job;
  }

  uint64_t Subscribe(const v1::SubscribeRequest& req,
                     std::shared_ptr<Stream> stream) {
    absl::MutexLock lock(&mu_);
    const uint64_t id = ++last_sub_;
    const uint32_t credit =
        req.max_in_flight() == 0 ? 100 : req.max_in_flight();
    subs_.emplace(id, Sub{credit, std::move(stream)});
    topics_[req.topic()].subs.push_back(id);
    kick_ = true;
    return id;
  }

  void Unsubscribe(uint64_t id) {
    absl::MutexLock lock(&mu_);
    subs_.erase(id);
    for (auto& [name, t] : topics_) std::erase(t.subs, id);
  }

  void Ack(const v1::AckRequest& req, v1::AckResponse* resp) {
    absl::MutexLock lock(&mu_);
    for (const std::string& token : req.ack_tokens()) {
      v1::AckResult* r = resp->add_results();
      r->set_ack_token(token);
      auto it = in_flight_.find(token);
      if (it == in_flight_.end()) {
        r->set_code(grpc::StatusCode::FAILED_PRECONDITION);
        r->set_message("ack_token: stale");
        continue;
      }
      auto sub = subs_.find(it->second.sub);
      if (sub != subs_.end()) ++sub->second.credit;
      --it->second.topic->in_flight;
      in_flight_.erase(it);
    }
    kick_ = true;
  }

  void Stats(const std::string& only, v1::GetStatsResponse* resp) {
    const int64_t now = NowMs();
    absl::MutexLock lock(&mu_);
    for (const auto& [name, t] : topics_) {
      if (!only.empty() && name != only) continue;
      v1::TopicStats* s = resp->add_topics();
      s->set_topic(name);
      const auto due_end = t.jobs.upper_bound(now);
      const auto ready = std::distance(t.jobs.begin(), due_end);
      s->set_ready(static_cast<uint64_t>(ready));
      s->set_scheduled(t.jobs.size() - static_cast<uint64_t>(ready));
      s->set_in_flight(static_cast<uint64_t>(t.in_flight));
      s->set_subscribers(static_cast<uint32_t>(t.subs.size()));
    }
  }

 private:
  struct Sub {
    uint32_t credit;
    std::shared_ptr<Stream> stream;
  };
  struct Topic {
    std::multimap<int64_t, v1::Job> jobs;  // by due ms
    std::vector<uint64_t> subs;            // round-robin order
    size_t next_sub = 0;
    int64_t in_flight = 0;
  };
  struct InFlight {
    uint64_t sub;
    Topic* topic;
  };
  using Batch = std::unordered_map<
      Stream*, std::pair<std::shared_ptr<Stream>, std::vector<v1::Delivery>>>;

  // Sleeps until the earliest due job of a topic with credit, or a kick
  // (new earlier job, new subscriber, ack); sends outside the lock.
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      kick_ = false;
      const int64_t now = NowMs();
      next_wake_ = kNever;
      Batch out;
      for (auto& [name, t] : topics_) DispatchLocked(t, now, &out);
      if (!out.empty()) {
        mu_.Unlock();
        for (auto& [raw, s] : out) s.first->Send(std::move(s.second));
        mu_.Lock();
        continue;
      }
      const absl::Time wake = next_wake_ == kNever
                                  ? absl::InfiniteFuture()
                                  : absl::FromUnixMillis(next_wake_);
      mu_.AwaitWithDeadline(absl::Condition(this, &Queue::Woken), wake);
    }
  }

  bool Woken() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return kick_ || stop_; }

  void DispatchLocked(Topic& t, int64_t now, Batch* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t n = t.subs.size();
    if (n == 0) return;
    auto it = t.jobs.begin();
    while (it != t.jobs.end() && it->first <= now) {
      Sub* sub = nullptr;
      uint64_t sub_id = 0;
      for (size_t k = 0; k < n && sub == nullptr; ++k) {
        sub_id = t.subs[(t.next_sub + k) % n];
        Sub& s = subs_.at(sub_id);
        if (s.credit > 0) {
          sub = &s;
          t.next_sub = (t.next_sub + k + 1) % n;
        }
      }
      if (sub == nullptr) return;  // an Ack kicks the next round
      --sub->credit;
      auto node = t.jobs.extract(it++);
      v1::Delivery d;
      v1::Job* job = d.mutable_job();
      job->Swap(&node.mapped());
      job->set_state(v1::JOB_STATE_IN_FLIGHT);
      job->set_attempts(1);
      *job->mutable_updated_at() = Ts(now);
      // As long as delayd's token: base64 of (version, attempt, nonce,
      // topic, id), 32 characters for the bench's "herd" ids.
      std::string token = absl::StrCat(job->topic(), "/", job->id(), "/",
                                       absl::Hex(++nonce_, absl::kZeroPad16));
      in_flight_.emplace(token, InFlight{sub_id, &t});
      ++t.in_flight;
      d.set_ack_token(std::move(token));
      d.set_attempt(1);
      *d.mutable_lease_expires_at() = Ts(now + kLeaseMs);
      auto& slot = (*out)[sub->stream.get()];
      if (slot.first == nullptr) slot.first = sub->stream;
      slot.second.push_back(std::move(d));
    }
    if (it != t.jobs.end()) next_wake_ = std::min(next_wake_, it->first);
  }

  absl::Mutex mu_;
  std::map<std::string, Topic> topics_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Sub> subs_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  uint64_t last_sub_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t nonce_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_wake_ ABSL_GUARDED_BY(mu_) = kNever;
  bool kick_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;  // last: starts after the members it reads
};

class SubscribeReactor final
    : public grpc::ServerWriteReactor<v1::SubscribeResponse> {
 public:
  SubscribeReactor(Queue* queue, const v1::SubscribeRequest& req)
      : queue_(queue),
        stream_(std::make_shared<Stream>(this, req.max_batch())) {
    id_ = queue_->Subscribe(req, stream_);
  }
  void OnWriteDone(bool ok) override { stream_->WriteDone(ok); }
  void OnCancel() override {
    stream_->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override {
    queue_->Unsubscribe(id_);
    delete this;
  }

 private:
  Queue* const queue_;
  std::shared_ptr<Stream> stream_;
  uint64_t id_ = 0;
};

// One ScheduleStream, answered inline on gRPC's thread: each Schedule of a
// message gets the reply Schedule would (--discard: nothing kept), a
// Reschedule or Cancel UNIMPLEMENTED. One read and one write outstanding;
// answers ready while a write is out go together in the next.
class ScheduleStreamReactor final
    : public grpc::ServerBidiReactor<v1::ScheduleStreamRequest,
                                     v1::ScheduleStreamResponse> {
 public:
  ScheduleStreamReactor(Queue* queue, bool keep) : queue_(queue), keep_(keep) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool finish = false;
      {
        absl::MutexLock lock(&mu_);
        read_done_ = true;
        finish = !writing_;
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    v1::ScheduleStreamResponse response;
    const int64_t now = NowMs();
    for (const v1::StreamRequest& r : request_.requests()) {
      v1::StreamAnswer* answer = response.add_answers();
      if (r.has_schedule()) {
        *answer->mutable_schedule()->mutable_job() =
            queue_->Add(r.schedule().job(), now, keep_);
        answer->mutable_schedule()->set_created(true);
      } else {
        answer->set_code(static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
      }
    }
    bool write = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_) {
        for (v1::StreamAnswer& a : *response.mutable_answers()) {
          *pending_.add_answers() = std::move(a);
        }
      } else {
        writing_ = true;
        writing_message_ = std::move(response);
        write = true;
      }
    }
    if (write) StartWrite(&writing_message_);
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    bool write = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (ok && pending_.answers_size() > 0) {
        writing_message_ = std::move(pending_);
        pending_.Clear();
        write = true;
      } else {
        writing_ = false;
        finish = read_done_ || !ok;
      }
    }
    if (write) StartWrite(&writing_message_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  Queue* const queue_;
  const bool keep_;
  v1::ScheduleStreamRequest request_;  // the read path's alone
  v1::ScheduleStreamResponse writing_message_;
  absl::Mutex mu_;
  v1::ScheduleStreamResponse pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
};

class Service final : public v1::DelayQueue::CallbackService {
 public:
  // keep: Schedule and ScheduleBatch queue their jobs for delivery.
  explicit Service(bool keep) : keep_(keep) {}

  grpc::ServerUnaryReactor* Schedule(grpc::CallbackServerContext* context,
                                     const v1::ScheduleRequest* req,
                                     v1::ScheduleResponse* resp) override {
    *resp->mutable_job() = queue_.Add(req->job(), NowMs(), keep_);
    resp->set_created(true);
    return Done(context);
  }

  grpc::ServerUnaryReactor* ScheduleBatch(
      grpc::CallbackServerContext* context, const v1::ScheduleBatchRequest* req,
      v1::ScheduleBatchResponse* resp) override {
    const int64_t now = NowMs();
    for (const v1::ScheduleRequest& r : req->requests()) {
      v1::ScheduleResult* result = resp->add_results();
      *result->mutable_job() = queue_.Add(r.job(), now, keep_);
      result->set_created(true);
    }
    return Done(context);
  }

  grpc::ServerBidiReactor<v1::ScheduleStreamRequest,
                          v1::ScheduleStreamResponse>*
  ScheduleStream(grpc::CallbackServerContext* /*context*/) override {
    return new ScheduleStreamReactor(&queue_, keep_);
  }

  grpc::ServerWriteReactor<v1::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* /*context*/,
      const v1::SubscribeRequest* req) override {
    return new SubscribeReactor(&queue_, *req);
  }

  grpc::ServerUnaryReactor* Ack(grpc::CallbackServerContext* context,
                                const v1::AckRequest* req,
                                v1::AckResponse* resp) override {
    queue_.Ack(*req, resp);
    return Done(context);
  }

  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* req,
                                     v1::GetStatsResponse* resp) override {
    queue_.Stats(req->topic(), resp);
    return Done(context);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  const bool keep_;
  Queue queue_;
};

}  // namespace
}  // namespace delayd::floor

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:7600";
  bool keep = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--discard") {
      keep = false;
    } else if (!arg.empty() && arg[0] != '-') {
      address = arg;
    } else {
      std::fprintf(stderr, "usage: floor_server [ADDRESS] [--discard]\n");
      return 2;
    }
  }
  delayd::floor::Service service(keep);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as delayd
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(16 << 20);  // as delayd
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "floor_server: cannot listen on %s\n",
                 address.c_str());
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  std::printf("floor_server: listening on %s\n", address.c_str());
  std::fflush(stdout);
  server->Wait();
  return 0;
}
