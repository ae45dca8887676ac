#include "server/rpc/schedule_stream_reactor.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/slice.h"
#include "server/core/stream_answer.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_parser.h"

namespace delayd::server {
namespace {

constexpr char kMethod[] = "ScheduleStream";

// A parse error of a StreamRequest names the field through the oneof
// ("schedule.job.id: ..."); the unary rpc names it from its own request
// ("job.id: ...").
absl::Status AsUnary(const absl::Status& status) {
  absl::string_view message = status.message();
  for (absl::string_view prefix : {"schedule.", "reschedule.", "cancel."}) {
    if (absl::ConsumePrefix(&message, prefix)) break;
  }
  return absl::Status(status.code(), message);
}

// Authorizes a request of the stream and reserves its quotas, as the unary
// rpc would; `topic` is set to the topic checked.
template <typename Request>
absl::Status Check(const Caller& caller, QuotaKeeper* quotas,
                   const Request& request, std::string* topic,
                   QuotaKeeper::Ticket* ticket) {
  if (absl::Status s = Authorize(caller, request, topic); !s.ok()) return s;
  absl::StatusOr<QuotaKeeper::Ticket> admitted = Admit(quotas, caller, request);
  if (!admitted.ok()) return admitted.status();
  *ticket = *std::move(admitted);
  return absl::OkStatus();
}

}  // namespace

void ScheduleStreamReactor::Request(RawDelayQueue* service,
                                    grpc::ServerCompletionQueue* cq,
                                    OpenCalls* open, JobService* jobs,
                                    WorkerPool* writes, RpcMetrics* metrics,
                                    QuotaKeeper* quotas,
                                    const OnArrival* on_arrival) {
  auto* reactor = new ScheduleStreamReactor(open, jobs, writes, metrics, quotas,
                                            on_arrival);
  reactor->NotifyWhenDone();
  service->RequestScheduleStream(reactor->context(), reactor->stream(), cq,
                                 reactor->arrived_tag());
}

ScheduleStreamReactor::ScheduleStreamReactor(OpenCalls* open, JobService* jobs,
                                             WorkerPool* writes,
                                             RpcMetrics* metrics,
                                             QuotaKeeper* quotas,
                                             const OnArrival* on_arrival)
    : AsyncStreamCall(open),
      jobs_(jobs),
      writes_(writes),
      metrics_(metrics),
      quotas_(quotas),
      on_arrival_(on_arrival),
      max_batch_(std::max<size_t>(1, jobs->limits().max_batch)) {}

void ScheduleStreamReactor::Arrived(bool ok) {
  if (!ok) {  // the server shuts down: no call came
    delete this;
    return;
  }
  (*on_arrival_)(*this);
}

void ScheduleStreamReactor::Begin(Caller caller, const absl::Status& refusal) {
  caller_ = std::move(caller);
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    refusal_ = refusal;
    actions = NextLocked();
  }
  Do(std::move(actions));
}

// `response` serialized into a slice of its own (no copy through a
// string).
ScheduleStreamReactor::Answers ScheduleStreamReactor::Serialize(
    const v1::ScheduleStreamResponse& response) {
  const size_t size = response.ByteSizeLong();
  grpc_slice slice = grpc_slice_malloc(size);
  response.SerializeWithCachedSizesToArray(GRPC_SLICE_START_PTR(slice));
  return {grpc::Slice(slice, grpc::Slice::STEAL_REF),
          static_cast<size_t>(response.answers_size())};
}

absl::Status ScheduleStreamReactor::TakeAll(std::vector<Entry>& entries) {
  if (absl::Status s =
          SplitRepeated(read_buffer_, *v1::ScheduleStreamRequest::descriptor(),
                        v1::ScheduleStreamRequest::kRequestsFieldNumber,
                        read_bytes_, read_items_);
      !s.ok()) {
    return s;
  }
  if (read_items_.size() > kMaxRequestsPerMessage) {
    return absl::InvalidArgumentError(
        absl::StrCat("requests: at most ", kMaxRequestsPerMessage,
                     " per message, got ", read_items_.size()));
  }
  entries.reserve(read_items_.size());
  for (std::string_view item : read_items_) entries.push_back(Take(item));
  return absl::OkStatus();
}

ScheduleStreamReactor::Entry ScheduleStreamReactor::Take(
    std::string_view bytes) {
  Entry e;
  e.bytes = bytes.size();
  e.read_at = absl::Now();
  absl::Status s = ParseRequest(bytes, e.request);
  std::string topic;
  if (!s.ok()) {
    s = AsUnary(s);
  } else if (e.request.has_schedule()) {
    s = Check(caller_, quotas_, e.request.schedule(), &topic, &e.ticket);
  } else if (e.request.has_reschedule()) {
    s = Check(caller_, quotas_, e.request.reschedule(), &topic, &e.ticket);
  } else if (e.request.has_cancel()) {
    s = Check(caller_, quotas_, e.request.cancel(), &topic, &e.ticket);
  }  // else: answered by JobService::Stream
  if (!s.ok()) {
    if (absl::IsPermissionDenied(s) || absl::IsResourceExhausted(s)) {
      Audit(caller_, kMethod, topic, s);
    }
    e.refused = true;
    e.answer.set_code(static_cast<int>(s.code()));
    e.answer.set_message(std::string(s.message()));
  }
  return e;
}

void ScheduleStreamReactor::OnReadDone(bool ok) {
  Actions actions;
  if (!ok) {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    read_closed_ = true;  // half-closed by the client, or broken
    actions = NextLocked();
  } else {
    std::vector<Entry> entries;
    absl::Status refused = TakeAll(entries);
    absl::MutexLock lock(&mu_);
    reading_ = false;
    for (Entry& entry : entries) {
      ++open_;
      open_bytes_ += entry.bytes;
      waiting_.push_back(std::move(entry));
    }
    if (!refused.ok()) {
      read_closed_ = true;  // nothing after it is read
      end_ = refused;
    }
    actions = NextLocked();
  }
  Do(std::move(actions));
}

void ScheduleStreamReactor::Start(std::deque<Entry> batch) {
  if (!jobs_->inline_writes()) {
    // Its writes wait for the disk: on a worker, one synced write a batch.
    auto moved = std::make_shared<std::deque<Entry>>(std::move(batch));
    writes_->Run([this, moved] { RunBatch(std::move(*moved)); });
    return;
  }
  while (true) {
    std::optional<Actions> actions = StartHere(std::move(batch));
    if (!actions.has_value()) return;  // answered later, elsewhere
    const bool more = actions->run;
    actions->run = false;
    batch = std::move(actions->batch);
    // With a batch claimed the stream cannot finish: `this` lives on.
    Do(std::move(*actions));
    if (!more) return;
  }
}

void ScheduleStreamReactor::RunBatch(std::deque<Entry> batch) {
  while (true) {
    std::vector<const v1::StreamRequest*> run;
    for (const Entry& e : batch) {
      if (!e.refused) run.push_back(&e.request);
    }
    std::vector<v1::StreamAnswer> answers;
    if (!run.empty()) answers = jobs_->Stream(run);
    Actions actions = Queue(batch, answers);
    // A batch read meanwhile runs here too: no hand-off to another worker
    // per batch while the stream is busy.
    const bool more = actions.run;
    actions.run = false;
    batch = std::move(actions.batch);
    // With a batch claimed the stream cannot finish: `this` lives on.
    Do(std::move(actions));
    if (!more) return;
  }
}

std::optional<ScheduleStreamReactor::Actions> ScheduleStreamReactor::StartHere(
    std::deque<Entry> batch) {
  auto running = std::make_shared<Running>();
  running->batch = std::move(batch);
  size_t count = 0;
  for (const Entry& e : running->batch) count += e.refused ? 0 : 1;
  running->answers.resize(count);
  size_t k = 0;
  auto it = running->batch.begin();
  for (; it != running->batch.end(); ++it) {
    if (it->refused) continue;
    running->pending.fetch_add(1, std::memory_order_relaxed);
    if (!StartOne(running, it->request, k)) {
      running->pending.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
    ++k;
  }
  if (it != running->batch.end()) {
    // It and the rest on a worker, which may wait, in order: one on a job
    // whose write is still gathered waits there for its key lock.
    std::vector<const v1::StreamRequest*> rest;
    for (; it != running->batch.end(); ++it) {
      if (!it->refused) rest.push_back(&it->request);
    }
    running->pending.fetch_add(1, std::memory_order_relaxed);
    writes_->Run([this, running, rest = std::move(rest), k] {
      std::vector<v1::StreamAnswer> answers = jobs_->Stream(rest);
      for (size_t j = 0; j < answers.size(); ++j) {
        running->answers[k + j] = std::move(answers[j]);
      }
      Arrive(running);
    });
  }
  if (running->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return std::nullopt;
  }
  return Queue(running->batch, running->answers);
}

bool ScheduleStreamReactor::StartOne(const std::shared_ptr<Running>& running,
                                     const v1::StreamRequest& request,
                                     size_t k) {
  if (request.has_schedule()) {
    JobWriter::ScheduleDone done =
        [this, running, k](absl::StatusOr<v1::ScheduleResponse> result) {
          SetStreamAnswer(running->answers[k], std::move(result),
                          &v1::StreamAnswer::mutable_schedule);
          Arrive(running);
        };
    return jobs_->ScheduleAsync(request.schedule(), done);
  }
  if (request.has_reschedule()) {
    JobWriter::RescheduleDone done =
        [this, running, k](absl::StatusOr<v1::RescheduleResponse> result) {
          SetStreamAnswer(running->answers[k], std::move(result),
                          &v1::StreamAnswer::mutable_reschedule);
          Arrive(running);
        };
    return jobs_->RescheduleAsync(request.reschedule(), done);
  }
  if (request.has_cancel()) {
    JobWriter::CancelDone done =
        [this, running, k](absl::StatusOr<v1::CancelResponse> result) {
          SetStreamAnswer(running->answers[k], std::move(result),
                          &v1::StreamAnswer::mutable_cancel);
          Arrive(running);
        };
    return jobs_->CancelAsync(request.cancel(), done);
  }
  return false;  // JobService::Stream answers it
}

void ScheduleStreamReactor::Arrive(const std::shared_ptr<Running>& running) {
  if (running->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Actions actions = Queue(running->batch, running->answers);
  Do(std::move(actions));
}

ScheduleStreamReactor::Actions ScheduleStreamReactor::Queue(
    std::deque<Entry>& batch, std::vector<v1::StreamAnswer>& answers) {
  std::vector<Answers> out;
  v1::ScheduleStreamResponse response;
  size_t response_bytes = 0;
  size_t bytes = 0;
  size_t k = 0;
  const absl::Time now = absl::Now();
  for (Entry& e : batch) {
    v1::StreamAnswer& answer = e.refused ? e.answer : answers[k++];
    // The write is applied (its jobs count as live): what it reserved goes
    // back.
    e.ticket = QuotaKeeper::Ticket();
    metrics_->Record(kMethod, answer.code(), now - e.read_at);
    bytes += e.bytes;
    const size_t size = answer.ByteSizeLong();
    if (response.answers_size() > 0 &&
        response_bytes + size > kMaxAnswerBytes) {
      out.push_back(Serialize(response));
      response.Clear();
      response_bytes = 0;
    }
    response_bytes += size;
    *response.add_answers() = std::move(answer);
  }
  if (response.answers_size() > 0) out.push_back(Serialize(response));
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
    open_bytes_ -= bytes;
    for (Answers& a : out) unwritten_.push_back(std::move(a));
    actions = NextLocked();
  }
  return actions;
}

void ScheduleStreamReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok) {
      open_ -= writing_count_;
    } else {
      cancelled_ = true;  // the client is gone: nothing more is written
    }
    actions = NextLocked();
  }
  Do(std::move(actions));
}

void ScheduleStreamReactor::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    actions = NextLocked();
  }
  Do(std::move(actions));
}

void ScheduleStreamReactor::OnDone() { delete this; }

ScheduleStreamReactor::Actions ScheduleStreamReactor::NextLocked() {
  Actions a;
  if (finished_) return a;
  if (!refusal_.ok()) {
    finished_ = true;
    a.finish = true;
    a.status = ToGrpcStatus(refusal_);
    return a;
  }
  // Finish only when nothing is under way: no read, write or batch that
  // another thread has started or is about to start.
  const bool idle = !reading_ && !writing_ && !running_;
  if (cancelled_) {
    if (idle) {
      finished_ = true;
      a.finish = true;
      a.status = grpc::Status(grpc::StatusCode::CANCELLED,
                              "the client cancelled the stream");
    }
    return a;
  }
  if (!running_ && !waiting_.empty()) {
    size_t bytes = 0;
    while (
        !waiting_.empty() && a.batch.size() < max_batch_ &&
        (a.batch.empty() || bytes + waiting_.front().bytes <= kMaxBatchBytes)) {
      bytes += waiting_.front().bytes;
      a.batch.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
    running_ = true;
    a.run = true;
  }
  if (!writing_ && !unwritten_.empty()) {
    std::vector<grpc::Slice> slices;
    size_t bytes = 0;
    writing_count_ = 0;
    while (!unwritten_.empty() &&
           (slices.empty() ||
            bytes + unwritten_.front().bytes.size() <= kMaxAnswerBytes)) {
      bytes += unwritten_.front().bytes.size();
      writing_count_ += unwritten_.front().count;
      slices.push_back(std::move(unwritten_.front().bytes));
      unwritten_.pop_front();
    }
    writing_buffer_ = grpc::ByteBuffer(slices.data(), slices.size());
    writing_ = true;
    a.write = true;
    a.more = !unwritten_.empty();
  }
  if (!reading_ && !read_closed_ && open_ < kMaxWaiting &&
      open_bytes_ < kMaxWaitingBytes) {
    reading_ = true;
    a.read = true;
  }
  if (read_closed_ && open_ == 0 && !reading_ && !writing_ && !running_) {
    finished_ = true;
    a.finish = true;
    a.status = ToGrpcStatus(end_);
  }
  return a;
}

void ScheduleStreamReactor::Do(Actions a) {
  if (a.finish) {
    Finish(a.status);  // may delete this (OnDone)
    return;
  }
  // A batch for a worker goes first, so that it runs while this thread
  // writes; one run here goes last, and claims what follows it itself.
  const bool here = a.run && jobs_->inline_writes();
  if (a.run && !here) Start(std::move(a.batch));
  if (a.write) {
    // More answers are queued: let gRPC send this one with the next.
    grpc::WriteOptions options;
    if (a.more) options.set_buffer_hint();
    StartWrite(&writing_buffer_, options);
  }
  if (a.read) StartRead(&read_buffer_);
  if (here) Start(std::move(a.batch));
}

}  // namespace delayd::server
