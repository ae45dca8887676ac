#include "tests/crash/job_model.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"

namespace delayd::crash {
namespace {

bool SameReply(const Reply& want, const Reply& got) {
  if (want.code != got.code || want.outcome != got.outcome) return false;
  if (want.job.has_value() != got.job.has_value()) return false;
  return !want.job.has_value() || want.job->SameVisible(*got.job);
}

bool SameVisible(const State& a, const State& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a.has_value() || a->SameVisible(*b);
}

void AddUnique(std::vector<State>& states, const State& s) {
  if (std::find(states.begin(), states.end(), s) == states.end()) {
    states.push_back(s);
  }
}

std::string DescribeAll(const std::vector<State>& states) {
  std::string out;
  for (const State& s : states) absl::StrAppend(&out, "\n    ", Describe(s));
  return out;
}

}  // namespace

std::string Describe(const State& s) {
  if (!s.has_value()) return "absent";
  std::string labels;
  for (const auto& [k, v] : s->labels) absl::StrAppend(&labels, k, "=", v, ",");
  return absl::StrCat("{fire_at_ms=", s->fire_at_ms,
                      " spec_fire_at_ms=", s->spec_fire_at_ms,
                      " payload=", absl::BytesToHexString(s->payload),
                      " labels={", labels, "}}");
}

Version VersionOf(const v1::Job& job) {
  Version v;
  v.payload = job.payload();
  v.labels.insert(job.labels().begin(), job.labels().end());
  v.fire_at_ms =
      job.fire_at().seconds() * 1000 + job.fire_at().nanos() / 1000000;
  v.spec_fire_at_ms = v.fire_at_ms;  // not visible; callers compare visibly
  return v;
}

v1::JobSpec SpecOf(const std::string& topic, const std::string& id,
                   const Version& v) {
  v1::JobSpec spec;
  spec.set_topic(topic);
  spec.set_id(id);
  spec.set_payload(v.payload);
  spec.mutable_labels()->insert(v.labels.begin(), v.labels.end());
  *spec.mutable_fire_at() = ToProto(absl::FromUnixMillis(v.spec_fire_at_ms));
  return spec;
}

std::string Op::Describe() const {
  switch (kind) {
    case Kind::kSchedule:
      return absl::StrCat("Schedule(", v1::IfExists_Name(if_exists), ", ",
                          crash::Describe(spec), ")");
    case Kind::kReschedule:
      return absl::StrCat("Reschedule(fire_at_ms=", fire_at_ms, ")");
    case Kind::kCancel:
      return "Cancel";
  }
  return "?";
}

std::string Reply::Describe() const {
  return absl::StrCat("code=", static_cast<int>(code),
                      " outcome=", v1::CancelOutcome_Name(outcome),
                      " job=", job ? crash::Describe(job) : "none");
}

bool OutcomeUnknown(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

Effect Apply(const Op& op, const State& prior) {
  Effect e{{}, prior};
  switch (op.kind) {
    case Op::Kind::kSchedule: {
      Version created = op.spec;
      created.fire_at_ms = created.spec_fire_at_ms;
      if (!prior.has_value() || op.if_exists == v1::IF_EXISTS_REPLACE) {
        e.next = created;
      } else if (op.if_exists != v1::IF_EXISTS_KEEP &&  // FAIL, UNSPECIFIED
                 !(prior->payload == created.payload &&
                   prior->labels == created.labels &&
                   prior->spec_fire_at_ms == created.spec_fire_at_ms)) {
        e.reply.code = grpc::StatusCode::ALREADY_EXISTS;
        return e;
      }
      // KEEP, or an identical FAIL retry: OK with the stored job.
      e.reply.job = e.next;
      return e;
    }
    case Op::Kind::kReschedule:
      if (!prior.has_value()) {
        e.reply.code = grpc::StatusCode::NOT_FOUND;
        return e;
      }
      e.next->fire_at_ms = op.fire_at_ms;
      e.reply.job = e.next;
      return e;
    case Op::Kind::kCancel:
      e.reply.outcome = prior.has_value() ? v1::CANCEL_OUTCOME_CANCELED
                                          : v1::CANCEL_OUTCOME_NOT_FOUND;
      e.next = std::nullopt;
      return e;
  }
  return e;
}

std::string KeyModel::Record(const Op& op, const Reply& reply) {
  std::vector<State> next;
  if (OutcomeUnknown(reply.code)) {
    next = states_;
    for (const State& prior : states_) AddUnique(next, Apply(op, prior).next);
  } else {
    for (const State& prior : states_) {
      const Effect e = Apply(op, prior);
      if (SameReply(e.reply, reply)) AddUnique(next, e.next);
    }
    if (next.empty()) {
      std::string predicted;
      for (const State& prior : states_) {
        absl::StrAppend(&predicted, "\n    from ", Describe(prior), ": ",
                        Apply(op, prior).reply.Describe());
      }
      return absl::StrCat(
          op.Describe(), " answered ", reply.Describe(),
          "; no possible prior state predicts that:", predicted);
    }
  }
  states_ = std::move(next);
  return "";
}

void KeyModel::RecordPrefixCancel(bool acknowledged) {
  if (acknowledged) states_.clear();
  AddUnique(states_, std::nullopt);
}

bool KeyModel::MustBeLive() const {
  return std::all_of(states_.begin(), states_.end(),
                     [](const State& s) { return s.has_value(); });
}

bool KeyModel::MayBeLive() const {
  return std::any_of(states_.begin(), states_.end(),
                     [](const State& s) { return s.has_value(); });
}

std::string KeyModel::Observe(const State& observed) {
  std::vector<State> next;
  for (const State& s : states_) {
    if (SameVisible(s, observed)) next.push_back(s);
  }
  if (next.empty()) {
    return absl::StrCat(
        "after restart the server shows ", Describe(observed),
        "; acknowledged operations allow only:", DescribeAll(states_));
  }
  states_ = std::move(next);
  return "";
}

}  // namespace delayd::crash
