#include "server/rpc/schedule_stream_reactor.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_parser.h"

namespace delayd::server {
namespace {

constexpr char kMethod[] = "ScheduleStream";

// A parse error of a ScheduleStreamRequest names the field through the
// oneof ("schedule.job.id: ..."); the unary rpc names it from its own
// request ("job.id: ...").
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

ScheduleStreamReactor::ScheduleStreamReactor(JobService* jobs,
                                             WorkerPool* writes,
                                             RpcMetrics* metrics,
                                             QuotaKeeper* quotas, Caller caller,
                                             const absl::Status& refusal)
    : jobs_(jobs),
      writes_(writes),
      metrics_(metrics),
      quotas_(quotas),
      caller_(std::move(caller)),
      max_batch_(std::max<size_t>(1, jobs->limits().max_batch)) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    refusal_ = refusal;
    actions = NextLocked();
  }
  Do(std::move(actions));
}

ScheduleStreamReactor::Entry ScheduleStreamReactor::Take(size_t bytes) {
  Entry e;
  e.bytes = bytes;
  e.read_at = absl::Now();
  absl::Status s = ParseRequest(read_buffer_, e.request);
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
    Entry entry = Take(read_buffer_.Length());
    absl::MutexLock lock(&mu_);
    reading_ = false;
    ++open_;
    open_bytes_ += entry.bytes;
    waiting_.push_back(std::move(entry));
    actions = NextLocked();
  }
  Do(std::move(actions));
}

void ScheduleStreamReactor::RunBatch(std::deque<Entry> batch) {
  std::vector<const v1::ScheduleStreamRequest*> run;
  for (const Entry& e : batch) {
    if (!e.refused) run.push_back(&e.request);
  }
  std::vector<v1::ScheduleStreamResponse> answers;
  if (!run.empty()) answers = jobs_->Stream(run);
  std::deque<grpc::ByteBuffer> out;
  size_t bytes = 0;
  size_t k = 0;
  for (Entry& e : batch) {
    const v1::ScheduleStreamResponse& answer =
        e.refused ? e.answer : answers[k++];
    // The write is applied (its jobs count as live): what it reserved goes
    // back.
    e.ticket = QuotaKeeper::Ticket();
    metrics_->Record(kMethod, answer.code(), absl::Now() - e.read_at);
    SerializeResponse(answer, out.emplace_back());
    bytes += e.bytes;
  }
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
    open_bytes_ -= bytes;
    for (grpc::ByteBuffer& b : out) unwritten_.push_back(std::move(b));
    actions = NextLocked();
  }
  Do(std::move(actions));
}

void ScheduleStreamReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok) {
      --open_;
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
    writing_buffer_ = std::move(unwritten_.front());
    unwritten_.pop_front();
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
    a.status = grpc::Status::OK;
  }
  return a;
}

void ScheduleStreamReactor::Do(Actions a) {
  if (a.finish) {
    Finish(a.status);  // may delete this (OnDone)
    return;
  }
  if (a.run) {
    auto batch = std::make_shared<std::deque<Entry>>(std::move(a.batch));
    writes_->Run([this, batch] { RunBatch(std::move(*batch)); });
  }
  if (a.write) {
    // More answers are queued: let gRPC send this one with the next.
    grpc::WriteOptions options;
    if (a.more) options.set_buffer_hint();
    StartWrite(&writing_buffer_, options);
  }
  if (a.read) StartRead(&read_buffer_);
}

}  // namespace delayd::server
