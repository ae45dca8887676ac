// The crash tests' model of what the server must hold: for each job key, the
// set of states it may be in given the replies the clients saw. A reply that
// acknowledged an operation narrows the set to the priors that predict it; an
// operation whose outcome is unknown (the server died, or the reply was an
// error that promises nothing) adds its effect as one more possibility. After
// a restart, what the server shows must be one of the possibilities, and
// becomes the only one.
//
// Value types; not thread-safe (each client thread owns its keys' models).
#ifndef DELAYD_TESTS_CRASH_JOB_MODEL_H_
#define DELAYD_TESTS_CRASH_JOB_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "delayd/v1/delayd.pb.h"
#include "grpcpp/support/status.h"

namespace delayd::crash {

// A live job as a client sees it, plus the spec it was created from (which
// decides whether an IF_EXISTS_FAIL retry is "identical").
struct Version {
  std::string payload;
  std::map<std::string, std::string> labels;
  int64_t fire_at_ms = 0;       // the current due time
  int64_t spec_fire_at_ms = 0;  // the due time the creating Schedule gave

  // Payload, labels and due time: what GetJob and ListJobs show.
  bool SameVisible(const Version& o) const {
    return payload == o.payload && labels == o.labels &&
           fire_at_ms == o.fire_at_ms;
  }
  friend bool operator==(const Version&, const Version&) = default;
};

// nullopt: no live job (never scheduled, canceled).
using State = std::optional<Version>;

std::string Describe(const State& s);
// The visible part of a Job from the server.
Version VersionOf(const v1::Job& job);
// The spec a Schedule of `v` sends (fire_at, never delay).
v1::JobSpec SpecOf(const std::string& topic, const std::string& id,
                   const Version& v);

// One operation on one job key.
struct Op {
  enum class Kind { kSchedule, kReschedule, kCancel };
  Kind kind = Kind::kSchedule;
  v1::IfExists if_exists = v1::IF_EXISTS_FAIL;  // kSchedule
  Version spec;                                 // kSchedule
  int64_t fire_at_ms = 0;                       // kReschedule
  std::string Describe() const;
};

// What the server answered for one operation on one key.
struct Reply {
  grpc::StatusCode code = grpc::StatusCode::OK;
  v1::CancelOutcome outcome = v1::CANCEL_OUTCOME_UNSPECIFIED;  // kCancel
  std::optional<Version> job;  // kSchedule / kReschedule when OK
  std::string Describe() const;
};

// True for codes after which the operation may or may not have been applied:
// the call failed in transport, timed out, or the server could not write.
bool OutcomeUnknown(grpc::StatusCode code);

class KeyModel {
 public:
  explicit KeyModel(State initial = std::nullopt) : states_{initial} {}

  // Records `op` answered by `reply`. Returns an error message when no
  // possible prior state predicts an acknowledged reply (the server lost or
  // invented something), "" otherwise.
  std::string Record(const Op& op, const Reply& reply);

  // Records a CancelByPrefix that matched this key: acknowledged, it left no
  // live job; with an unknown outcome it may have.
  void RecordPrefixCancel(bool acknowledged);
  // Whether the job is live in every / in some possible state.
  bool MustBeLive() const;
  bool MayBeLive() const;

  // After a restart: `observed` is what the server holds. Returns an error
  // message when it is none of the possibilities; else they collapse to it.
  std::string Observe(const State& observed);

  const std::vector<State>& states() const { return states_; }

 private:
  std::vector<State> states_;  // no duplicates, never empty
};

// What `op` does to `prior`, and the reply it must get.
struct Effect {
  Reply reply;
  State next;
};
Effect Apply(const Op& op, const State& prior);

}  // namespace delayd::crash

#endif  // DELAYD_TESTS_CRASH_JOB_MODEL_H_
