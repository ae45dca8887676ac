#include "bench/delayd-bench/loader.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "bench/delayd-bench/common.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"

namespace delayd::bench {
namespace {

// One connection with its one call in flight. Owned by the thread that
// drives its completion queue.
struct Conn {
  int t = 0;        // index among all connections (ids, seeds)
  int64_t n = 0;    // jobs to schedule
  int64_t seq = 0;  // jobs sent so far
  int b = 0;        // jobs in the call in flight
  double t0 = 0;    // when it was sent
  std::unique_ptr<v1::DelayQueue::Stub> stub;
  std::unique_ptr<Rng> rng;
  std::unique_ptr<grpc::ClientContext> context;
  v1::ScheduleRequest one;
  v1::ScheduleResponse one_reply;
  v1::ScheduleBatchRequest many;
  v1::ScheduleBatchResponse many_reply;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ScheduleResponse>>
      one_call;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ScheduleBatchResponse>>
      many_call;
  grpc::Status status;
  // Results.
  int64_t done = 0;
  int64_t errors = 0;
  double end = 0;
  std::vector<float> rtt_us;
  std::string first_error;
};

void SetDue(const LoadSpec& spec, Rng& rng, int64_t now_ms, v1::JobSpec* job) {
  int64_t due;
  if (spec.window_ms > 0) {
    due = spec.window_start_ms +
          static_cast<int64_t>(rng.Next() %
                               static_cast<uint64_t>(spec.window_ms));
  } else {
    due = now_ms + spec.min_delay_ms +
          static_cast<int64_t>(
              rng.Next() %
              static_cast<uint64_t>(spec.max_delay_ms - spec.min_delay_ms + 1));
  }
  google::protobuf::Timestamp at;
  at.set_seconds(due / 1000);
  at.set_nanos(static_cast<int32_t>(due % 1000) * 1'000'000);
  if (spec.recurring_interval_ms > 0) {
    v1::Recurrence& r = *job->mutable_recurrence();
    r.mutable_every()->mutable_interval()->set_seconds(
        spec.recurring_interval_ms / 1000);
    r.mutable_every()->mutable_interval()->set_nanos(
        static_cast<int32_t>(spec.recurring_interval_ms % 1000) * 1'000'000);
    *r.mutable_every()->mutable_anchor() = at;
    *r.mutable_start_at() = at;
  } else {
    *job->mutable_fire_at() = at;
  }
  MakePayload(due, rng.Next(), job->mutable_payload());
}

void Fail(Conn& c, int64_t n, const std::string& why) {
  c.errors += n;
  if (c.first_error.empty()) c.first_error = why;
}

void Send(const LoadSpec& spec, Conn& c, grpc::CompletionQueue& cq) {
  c.b = static_cast<int>(std::min<int64_t>(spec.batch, c.n - c.seq));
  const int64_t now = static_cast<int64_t>(NowMs());
  c.context = std::make_unique<grpc::ClientContext>();
  Authorize(spec.endpoint, c.context.get());
  c.context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(120));
  if (spec.batch == 1) {
    v1::JobSpec* job = c.one.mutable_job();
    job->set_id(JobId(spec.id_prefix, c.t, c.seq));
    SetDue(spec, *c.rng, now, job);
  } else {
    while (c.many.requests_size() > c.b)
      c.many.mutable_requests()->RemoveLast();
    while (c.many.requests_size() < c.b) {
      c.many.add_requests()->mutable_job()->set_topic(spec.topic);
    }
    for (int k = 0; k < c.b; ++k) {
      v1::JobSpec* job = c.many.mutable_requests(k)->mutable_job();
      job->set_id(JobId(spec.id_prefix, c.t, c.seq + k));
      SetDue(spec, *c.rng, now, job);
    }
  }
  c.t0 = MonoS();
  if (spec.batch == 1) {
    c.one_call = c.stub->AsyncSchedule(c.context.get(), c.one, &cq);
    c.one_call->Finish(&c.one_reply, &c.status, &c);
  } else {
    c.many_call = c.stub->AsyncScheduleBatch(c.context.get(), c.many, &cq);
    c.many_call->Finish(&c.many_reply, &c.status, &c);
  }
}

// Records the finished call of `c`; false when the connection should stop.
bool Finish(const LoadSpec& spec, Conn& c) {
  const double t1 = MonoS();
  if (!c.status.ok()) {
    Fail(c, c.b, c.status.error_message());
    // The server is gone or stuck: stop, as dqbench does on a broken
    // connection.
    if (c.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        c.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return false;
    }
  } else if (spec.batch == 1) {
    ++c.done;
  } else {
    for (const v1::ScheduleResult& res : c.many_reply.results()) {
      if (res.code() == 0) {
        ++c.done;
      } else {
        Fail(c, 1, res.message());
      }
    }
  }
  c.rtt_us.push_back(static_cast<float>((t1 - c.t0) * 1e6));
  c.seq += c.b;
  return true;
}

// Drives `conns` on one completion queue until each is done or past
// `deadline` (MonoS()).
void Drive(const LoadSpec& spec, const std::vector<Conn*>& conns,
           double deadline) {
  grpc::CompletionQueue cq;
  int active = 0;
  for (Conn* c : conns) {
    if (c->n > 0) {
      Send(spec, *c, cq);
      ++active;
    } else {
      c->end = MonoS();
    }
  }
  void* tag;
  bool ok;
  while (active > 0 && cq.Next(&tag, &ok)) {
    Conn& c = *static_cast<Conn*>(tag);
    if (Finish(spec, c) && c.seq < c.n && MonoS() <= deadline) {
      Send(spec, c, cq);
    } else {
      c.end = MonoS();
      --active;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace

std::vector<int64_t> FirstIndexes(int64_t jobs, int conns) {
  std::vector<int64_t> first;
  for (int64_t t = 0, next = 0; t < conns; ++t) {
    first.push_back(next);
    next += jobs / conns + (t < jobs % conns ? 1 : 0);
  }
  return first;
}

namespace {

// One connection's ScheduleStream: the writer keeps up to stream_window
// requests unanswered, the reader takes the answers in order.
void DriveStream(const LoadSpec& spec, Conn& c, double deadline) {
  grpc::ClientContext context;
  Authorize(spec.endpoint, &context);
  auto stream = c.stub->ScheduleStream(&context);
  absl::Mutex mu;
  std::deque<double> sent;  // write times of the requests unanswered
  struct Room {
    const std::deque<double>* sent;
    size_t window;
  } room{&sent, static_cast<size_t>(spec.stream_window)};
  std::thread writer([&] {
    // One request per message: what a client that does not batch sends.
    v1::ScheduleStreamRequest request;
    v1::JobSpec* job =
        request.add_requests()->mutable_schedule()->mutable_job();
    job->set_topic(spec.topic);
    for (; c.seq < c.n && MonoS() <= deadline; ++c.seq) {
      job->set_id(JobId(spec.id_prefix, c.t, c.seq));
      SetDue(spec, *c.rng, static_cast<int64_t>(NowMs()), job);
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Room* r) { return r->sent->size() < r->window; }, &room));
        sent.push_back(MonoS());
      }
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });
  v1::ScheduleStreamResponse message;
  while (stream->Read(&message)) {
    const double t1 = MonoS();
    for (const v1::StreamAnswer& answer : message.answers()) {
      double t0;
      {
        absl::MutexLock lock(&mu);
        t0 = sent.front();
        sent.pop_front();
      }
      c.rtt_us.push_back(static_cast<float>((t1 - t0) * 1e6));
      if (answer.code() == 0) {
        ++c.done;
      } else {
        Fail(c, 1, answer.message());
      }
    }
  }
  // No more answers: on a broken stream the writer may wait for room that
  // never comes. Let it through (its writes then fail) before Finish.
  int64_t unanswered = 0;
  {
    absl::MutexLock lock(&mu);
    room.window = std::numeric_limits<size_t>::max();
  }
  writer.join();
  unanswered = static_cast<int64_t>(sent.size());
  const grpc::Status status = stream->Finish();
  if (!status.ok() || unanswered > 0) {
    Fail(c, unanswered,
         status.ok() ? "stream ended with requests unanswered"
                     : status.error_message());
  }
  c.end = MonoS();
}

}  // namespace

LoadResult RunLoad(const LoadSpec& spec) {
  LoadResult out;
  out.offsets = FirstIndexes(spec.jobs, spec.conns);
  std::vector<std::unique_ptr<Conn>> conns;
  for (int t = 0; t < spec.conns; ++t) {
    auto c = std::make_unique<Conn>();
    c->t = t;
    c->n =
        (t + 1 < spec.conns ? out.offsets[t + 1] : spec.jobs) - out.offsets[t];
    auto channel = NewChannel(spec.endpoint, spec.channel_tag + t);
    channel->WaitForConnected(std::chrono::system_clock::now() +
                              std::chrono::seconds(10));
    c->stub = v1::DelayQueue::NewStub(channel);
    c->rng = std::make_unique<Rng>(spec.seed + t);
    c->one.mutable_job()->set_topic(spec.topic);
    c->rtt_us.reserve(static_cast<size_t>(c->n / spec.batch + 1));
    conns.push_back(std::move(c));
  }
  const int threads = std::clamp(spec.client_threads, 1, spec.conns);
  std::vector<std::vector<Conn*>> shares(threads);
  for (int t = 0; t < spec.conns; ++t) {
    shares[t % threads].push_back(conns[t].get());
  }
  const double start = MonoS();
  const double deadline =
      spec.max_seconds > 0 ? start + spec.max_seconds : 1e300;
  std::vector<std::thread> drivers;
  if (spec.stream_window > 0) {
    for (auto& c : conns) {
      drivers.emplace_back(
          [&, c = c.get()] { DriveStream(spec, *c, deadline); });
    }
  } else {
    for (int i = 0; i < threads; ++i) {
      drivers.emplace_back([&, i] { Drive(spec, shares[i], deadline); });
    }
  }
  for (std::thread& th : drivers) th.join();
  double end = start;
  for (auto& c : conns) {
    out.done += c->done;
    out.errors += c->errors;
    end = std::max(end, c->end);
    out.rtt_us.insert(out.rtt_us.end(), c->rtt_us.begin(), c->rtt_us.end());
    if (out.first_error.empty()) out.first_error = c->first_error;
  }
  out.secs = end - start;
  out.capped = out.done + out.errors < spec.jobs;
  std::sort(out.rtt_us.begin(), out.rtt_us.end());
  return out;
}

}  // namespace delayd::bench
