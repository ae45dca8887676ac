#include "tests/crash/crash_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "tests/support/rpc_deadline.h"

namespace delayd::crash {
namespace {

using ::delayd::testing::SetDeadline;

// Generous: under ASan on 2 shared cores a synced write can take a while.
constexpr absl::Duration kCallDeadline = absl::Seconds(20);

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

class Client {
 public:
  Client(std::shared_ptr<grpc::Channel> channel, uint64_t seed, int64_t t0_ms,
         ClientState& state)
      : stub_(v1::DelayQueue::NewStub(std::move(channel))),
        rng_(seed),
        t0_ms_(t0_ms),
        s_(state) {}

  // One random call; true when its outcome is unknown.
  bool Step() {
    ++s_.calls;
    const int r = static_cast<int>(Uniform(rng_, 0, 99));
    if (r < 27) return ScheduleOwned();
    if (r < 36)
      return Schedule(NewFreshKey(), v1::IF_EXISTS_FAIL, NewVersion());
    if (r < 50) return Batch();
    if (r < 63) return Reschedule(OwnedKey());
    if (r < 74) return Cancel(OwnedKey());
    if (r < 77) return PrefixCancel();
    if (r < 87) return Stream();
    return SharedOp();
  }

 private:
  Key OwnedKey() {
    return {
        kTopics[Uniform(rng_, 0, kTopics.size() - 1)],
        absl::StrCat("o", s_.index, "-", Uniform(rng_, 0, kOwnedPerTopic - 1))};
  }
  Key NewFreshKey() {
    Key key{kTopics[Uniform(rng_, 0, kTopics.size() - 1)],
            absl::StrCat("f", s_.index, "-", s_.next_fresh++)};
    s_.models.emplace(key, KeyModel());
    return key;
  }
  Key SharedKey() {
    return {kTopics[Uniform(rng_, 0, kTopics.size() - 1)],
            absl::StrCat("s-", Uniform(rng_, 0, kSharedPerTopic - 1))};
  }

  Version NewVersion() {
    Version v;
    v.payload.resize(Uniform(rng_, 0, 150));
    for (char& c : v.payload) c = static_cast<char>(Uniform(rng_, 0, 255));
    for (int64_t n = Uniform(rng_, 0, 3); n > 0; --n) {
      v.labels[absl::StrCat("k", Uniform(rng_, 0, 4))] =
          absl::StrCat("v", Uniform(rng_, 0, 1000000));
    }
    v.spec_fire_at_ms = v.fire_at_ms = RandomFireAtMs(rng_, t0_ms_);
    return v;
  }

  void Record(const Key& key, const Op& op, const Reply& reply) {
    if (OutcomeUnknown(reply.code)) ++s_.unknown_calls;
    if (std::string error = s_.models.at(key).Record(op, reply);
        !error.empty()) {
      s_.failures.push_back(
          absl::StrCat("(", key.topic, ", ", key.id, "): ", error));
    }
  }

  static Op ScheduleOp(v1::IfExists if_exists, const Version& v) {
    Op op;
    op.kind = Op::Kind::kSchedule;
    op.if_exists = if_exists;
    op.spec = v;
    return op;
  }

  // A Schedule of `key`, an owned key, in any if_exists mode.
  Op OwnedScheduleOp(const Key& key) {
    const int r = static_cast<int>(Uniform(rng_, 0, 99));
    const v1::IfExists if_exists = r < 35   ? v1::IF_EXISTS_FAIL
                                   : r < 55 ? v1::IF_EXISTS_KEEP
                                   : r < 90 ? v1::IF_EXISTS_REPLACE
                                            : v1::IF_EXISTS_UNSPECIFIED;
    Version v = NewVersion();
    // Often retry the spec the job was created with: an identical retry.
    const State& some = s_.models.at(key).states().front();
    if (some.has_value() && Uniform(rng_, 0, 2) == 0) v = *some;
    return ScheduleOp(if_exists, v);
  }

  bool ScheduleOwned() {
    const Key key = OwnedKey();
    const Op op = OwnedScheduleOp(key);
    return Schedule(key, op.if_exists, op.spec);
  }

  Op RescheduleOp() {
    Op op;
    op.kind = Op::Kind::kReschedule;
    op.fire_at_ms = RandomFireAtMs(rng_, t0_ms_);
    return op;
  }

  static Op CancelOp() {
    Op op;
    op.kind = Op::Kind::kCancel;
    return op;
  }

  static v1::ScheduleRequest ScheduleRequestOf(const Key& key, const Op& op) {
    v1::ScheduleRequest req;
    *req.mutable_job() = SpecOf(key.topic, key.id, op.spec);
    req.set_if_exists(op.if_exists);
    return req;
  }
  static v1::RescheduleRequest RescheduleRequestOf(const Key& key,
                                                   const Op& op) {
    v1::RescheduleRequest req;
    req.mutable_key()->set_topic(key.topic);
    req.mutable_key()->set_id(key.id);
    *req.mutable_fire_at() = ToProto(absl::FromUnixMillis(op.fire_at_ms));
    return req;
  }
  static v1::CancelRequest CancelRequestOf(const Key& key) {
    v1::CancelRequest req;
    req.mutable_key()->set_topic(key.topic);
    req.mutable_key()->set_id(key.id);
    return req;
  }

  bool Schedule(const Key& key, v1::IfExists if_exists, const Version& v) {
    const Op op = ScheduleOp(if_exists, v);
    v1::ScheduleResponse resp;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const grpc::Status status =
        stub_->Schedule(&context, ScheduleRequestOf(key, op), &resp);
    Reply reply{status.error_code(), {}, {}};
    if (status.ok()) reply.job = VersionOf(resp.job());
    Record(key, op, reply);
    return OutcomeUnknown(reply.code);
  }

  bool Batch() {
    struct Item {
      Key key;
      Op op;
      bool shared = false;
      bool fresh = false;
    };
    std::vector<Item> items;
    std::vector<Key> used;
    for (int64_t n = Uniform(rng_, 0, 3); n > 0; --n) {
      const Key key = OwnedKey();
      if (std::find(used.begin(), used.end(), key) != used.end()) continue;
      used.push_back(key);
      const v1::IfExists modes[] = {v1::IF_EXISTS_FAIL, v1::IF_EXISTS_KEEP,
                                    v1::IF_EXISTS_REPLACE};
      items.push_back(
          {key, ScheduleOp(modes[Uniform(rng_, 0, 2)], NewVersion())});
    }
    for (int64_t n = Uniform(rng_, 1, 3); n > 0; --n) {
      items.push_back({NewFreshKey(),
                       ScheduleOp(v1::IF_EXISTS_FAIL, NewVersion()), false,
                       true});
    }
    if (Uniform(rng_, 0, 2) == 0) {
      items.push_back(
          {SharedKey(), ScheduleOp(v1::IF_EXISTS_REPLACE, NewVersion()), true});
    }
    std::shuffle(items.begin(), items.end(), rng_);

    v1::ScheduleBatchRequest req;
    for (const Item& item : items) {
      v1::ScheduleRequest* r = req.add_requests();
      *r->mutable_job() = SpecOf(item.key.topic, item.key.id, item.op.spec);
      r->set_if_exists(item.op.if_exists);
    }
    v1::ScheduleBatchResponse resp;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const absl::Time start = absl::Now();
    const grpc::Status status = stub_->ScheduleBatch(&context, req, &resp);
    const absl::Time end = absl::Now();
    const bool unknown = OutcomeUnknown(status.error_code());
    if (!status.ok() && !unknown) {
      s_.failures.push_back(
          absl::StrCat("ScheduleBatch failed: ", status.error_message()));
      return false;
    }
    if (status.ok() && resp.results_size() != req.requests_size()) {
      s_.failures.push_back("ScheduleBatch: wrong number of results");
      return false;
    }
    std::vector<Key> fresh;
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      Reply reply{grpc::StatusCode::UNAVAILABLE, {}, {}};
      if (status.ok()) {
        const v1::ScheduleResult& result = resp.results(i);
        reply.code = static_cast<grpc::StatusCode>(result.code());
        if (result.code() == 0) reply.job = VersionOf(result.job());
      }
      if (item.fresh) fresh.push_back(item.key);
      if (!item.shared) {
        Record(item.key, item.op, reply);
        continue;
      }
      if (status.ok() && (reply.code != grpc::StatusCode::OK ||
                          !reply.job->SameVisible(
                              Apply(item.op, std::nullopt).next.value()))) {
        s_.failures.push_back(absl::StrCat("batch REPLACE of shared (",
                                           item.key.topic, ", ", item.key.id,
                                           ") answered ", reply.Describe()));
      }
      s_.shared_ops.push_back({item.key, start,
                               unknown ? absl::InfiniteFuture() : end, !unknown,
                               item.op.spec, "batch REPLACE"});
    }
    if (unknown) s_.unknown_batches.push_back(std::move(fresh));
    return unknown;
  }

  bool Reschedule(const Key& key) {
    const Op op = RescheduleOp();
    v1::RescheduleResponse resp;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const grpc::Status status =
        stub_->Reschedule(&context, RescheduleRequestOf(key, op), &resp);
    Reply reply{status.error_code(), {}, {}};
    if (status.ok()) reply.job = VersionOf(resp.job());
    Record(key, op, reply);
    return OutcomeUnknown(reply.code);
  }

  bool Cancel(const Key& key) {
    const Op op = CancelOp();
    v1::CancelResponse resp;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const grpc::Status status =
        stub_->Cancel(&context, CancelRequestOf(key), &resp);
    Reply reply{status.error_code(), {}, {}};
    if (status.ok()) reply.outcome = resp.outcome();
    Record(key, op, reply);
    return OutcomeUnknown(reply.code);
  }

  // One ScheduleStream: 1-3 messages of 1-4 requests each, all sent before
  // any answer is read, so that the server may batch them. The requests
  // are Schedules, Reschedules and Cancels of owned keys (a key may come
  // twice: each answer is what its unary rpc would answer after those
  // before it) and Schedules of fresh keys. A request the stream did not
  // answer (it broke) has an unknown outcome.
  bool Stream() {
    struct Item {
      Key key;
      Op op;
    };
    std::vector<Item> items;
    std::vector<v1::ScheduleStreamRequest> messages(Uniform(rng_, 1, 3));
    for (v1::ScheduleStreamRequest& message : messages) {
      for (int64_t n = Uniform(rng_, 1, 4); n > 0; --n) {
        const int r = static_cast<int>(Uniform(rng_, 0, 99));
        Item item;
        v1::StreamRequest* req = message.add_requests();
        if (r < 20) {
          item.key = NewFreshKey();
          item.op = ScheduleOp(v1::IF_EXISTS_FAIL, NewVersion());
        } else {
          item.key = OwnedKey();
          item.op = r < 60   ? OwnedScheduleOp(item.key)
                    : r < 80 ? RescheduleOp()
                             : CancelOp();
        }
        switch (item.op.kind) {
          case Op::Kind::kSchedule:
            *req->mutable_schedule() = ScheduleRequestOf(item.key, item.op);
            break;
          case Op::Kind::kReschedule:
            *req->mutable_reschedule() = RescheduleRequestOf(item.key, item.op);
            break;
          case Op::Kind::kCancel:
            *req->mutable_cancel() = CancelRequestOf(item.key);
            break;
        }
        items.push_back(std::move(item));
      }
    }
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    std::unique_ptr<grpc::ClientReaderWriter<v1::ScheduleStreamRequest,
                                             v1::ScheduleStreamResponse>>
        stream = stub_->ScheduleStream(&context);
    for (const v1::ScheduleStreamRequest& message : messages) {
      if (!stream->Write(message)) break;
    }
    stream->WritesDone();
    std::vector<v1::StreamAnswer> answers;
    v1::ScheduleStreamResponse resp;
    while (stream->Read(&resp)) {
      for (v1::StreamAnswer& a : *resp.mutable_answers()) {
        answers.push_back(std::move(a));
      }
    }
    const grpc::Status status = stream->Finish();
    ++s_.streams;
    s_.broken_streams += !status.ok();
    if (!status.ok() && !OutcomeUnknown(status.error_code())) {
      s_.failures.push_back(
          absl::StrCat("ScheduleStream failed: ", status.error_message()));
      return false;
    }
    if (answers.size() > items.size() ||
        (status.ok() && answers.size() != items.size())) {
      s_.failures.push_back(absl::StrCat("ScheduleStream: ", answers.size(),
                                         " answers to ", items.size(),
                                         " requests"));
      return false;
    }
    bool unknown = false;
    for (size_t i = 0; i < items.size(); ++i) {
      Reply reply{grpc::StatusCode::UNAVAILABLE, {}, {}};
      if (i < answers.size()) {
        const v1::StreamAnswer& a = answers[i];
        reply.code = static_cast<grpc::StatusCode>(a.code());
        if (a.code() == 0 && a.has_schedule()) {
          reply.job = VersionOf(a.schedule().job());
        } else if (a.code() == 0 && a.has_reschedule()) {
          reply.job = VersionOf(a.reschedule().job());
        } else if (a.code() == 0 && a.has_cancel()) {
          reply.outcome = a.cancel().outcome();
        }
      }
      unknown |= OutcomeUnknown(reply.code);
      Record(items[i].key, items[i].op, reply);
    }
    return unknown;
  }

  bool PrefixCancel() {
    const std::string topic = kTopics[Uniform(rng_, 0, kTopics.size() - 1)];
    std::string prefix = absl::StrCat("o", s_.index, "-");
    if (Uniform(rng_, 0, 3) != 0) absl::StrAppend(&prefix, Uniform(rng_, 0, 9));
    v1::CancelByPrefixRequest req;
    req.set_topic(topic);
    req.set_id_prefix(prefix);
    v1::CancelByPrefixResponse resp;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const grpc::Status status = stub_->CancelByPrefix(&context, req, &resp);
    const bool unknown = OutcomeUnknown(status.error_code());
    if (!status.ok() && !unknown) {
      s_.failures.push_back(absl::StrCat("CancelByPrefix(", topic, ", ", prefix,
                                         ") failed: ", status.error_message()));
      return false;
    }
    if (unknown) ++s_.unknown_calls;
    uint64_t must = 0, may = 0;
    for (auto& [key, model] : s_.models) {
      if (key.topic != topic || !key.id.starts_with(prefix)) continue;
      must += model.MustBeLive();
      may += model.MayBeLive();
      model.RecordPrefixCancel(!unknown);
    }
    if (status.ok() && (resp.canceled() < must || resp.canceled() > may)) {
      s_.failures.push_back(absl::StrCat(
          "CancelByPrefix(", topic, ", ", prefix, ") canceled ",
          resp.canceled(), " jobs; the model says ", must, "-", may));
    }
    return unknown;
  }

  bool SharedOp() {
    const Key key = SharedKey();
    const bool cancel = Uniform(rng_, 0, 9) < 4;
    grpc::ClientContext context;
    SetDeadline(context, kCallDeadline);
    const absl::Time start = absl::Now();
    grpc::Status status;
    State effect;
    bool as_expected = true;
    if (cancel) {
      v1::CancelRequest req;
      req.mutable_key()->set_topic(key.topic);
      req.mutable_key()->set_id(key.id);
      v1::CancelResponse resp;
      status = stub_->Cancel(&context, req, &resp);
      as_expected = resp.outcome() == v1::CANCEL_OUTCOME_CANCELED ||
                    resp.outcome() == v1::CANCEL_OUTCOME_NOT_FOUND;
    } else {
      const Version v = NewVersion();
      v1::ScheduleRequest req;
      *req.mutable_job() = SpecOf(key.topic, key.id, v);
      req.set_if_exists(v1::IF_EXISTS_REPLACE);
      v1::ScheduleResponse resp;
      status = stub_->Schedule(&context, req, &resp);
      as_expected = VersionOf(resp.job()).SameVisible(v);
      effect = v;
    }
    const absl::Time end = absl::Now();
    const bool unknown = OutcomeUnknown(status.error_code());
    if (unknown) ++s_.unknown_calls;
    if (!unknown && (!status.ok() || !as_expected)) {
      s_.failures.push_back(
          absl::StrCat(cancel ? "Cancel" : "Schedule REPLACE", " of shared (",
                       key.topic, ", ", key.id, ") answered code ",
                       status.error_code(), ": ", status.error_message()));
      return false;
    }
    s_.shared_ops.push_back({key, start, unknown ? absl::InfiniteFuture() : end,
                             !unknown, effect,
                             cancel ? "Cancel" : "Schedule REPLACE"});
    return unknown;
  }

  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  std::mt19937_64 rng_;
  const int64_t t0_ms_;
  ClientState& s_;
};

}  // namespace

int64_t RandomFireAtMs(std::mt19937_64& rng, int64_t t0_ms) {
  if (Uniform(rng, 0, 4) == 0) return t0_ms - Uniform(rng, 1000, 600000);
  return t0_ms + Uniform(rng, 600000, 3000000);
}

std::vector<State> SharedCandidates(const State& initial,
                                    const std::vector<SharedOp>& ops) {
  std::vector<State> out;
  absl::Time last_acked_start = absl::InfinitePast();
  for (const SharedOp& op : ops) {
    if (op.acknowledged)
      last_acked_start = std::max(last_acked_start, op.start);
  }
  if (last_acked_start == absl::InfinitePast()) out.push_back(initial);
  for (const SharedOp& op : ops) {
    // An acknowledged call that started after this one ended applied later.
    if (last_acked_start > op.end) continue;
    out.push_back(op.effect);
  }
  return out;
}

ClientState::ClientState(int index) : index(index) {
  for (const char* topic : kTopics) {
    for (int n = 0; n < kOwnedPerTopic; ++n) {
      models.emplace(Key{topic, absl::StrCat("o", index, "-", n)}, KeyModel());
    }
  }
}

void RunClient(std::shared_ptr<grpc::Channel> channel, uint64_t seed,
               int64_t t0_ms, const std::atomic<bool>& killed,
               ClientState& state) {
  Client client(std::move(channel), seed, t0_ms, state);
  while (true) {
    if (client.Step() && killed) return;
  }
}

}  // namespace delayd::crash
