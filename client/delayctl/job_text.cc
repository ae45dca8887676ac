#include "client/delayctl/job_text.h"

#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/delayctl/format.h"
#include "delayd/proto_time.h"

namespace delayd::delayctl {

std::string StateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  return name.substr(std::string("JOB_STATE_").size());
}

absl::StatusOr<v1::JobState> ParseState(const std::string& text) {
  std::string name = absl::AsciiStrToUpper(text);
  absl::StrReplaceAll({{"-", "_"}}, &name);
  if (name.rfind("JOB_STATE_", 0) != 0) name = "JOB_STATE_" + name;
  v1::JobState state;
  if (!v1::JobState_Parse(name, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state: unknown state '", text,
                     "' (scheduled, ready, in-flight, dead, done, canceled)"));
  }
  return state;
}

std::string KeyText(const std::string& topic, const std::string& id) {
  return absl::StrCat(topic, "/", id);
}

std::string JobLine(const v1::Job& job, absl::Time now) {
  return absl::StrCat(KeyText(job.topic(), job.id()), "  ",
                      StateName(job.state()), "  due ",
                      RelativeTime(FromProto(job.fire_at()), now));
}

std::string JobDetail(const v1::Job& job, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"topic", job.topic()},
      {"id", job.id()},
      {"state", StateName(job.state())},
      {"due", RelativeTime(FromProto(job.fire_at()), now, /*millis=*/true)},
      {"attempts",
       absl::StrCat(job.attempts(), " of ", job.retry().max_attempts())},
  };
  const v1::RetryPolicy& r = job.retry();
  rows.push_back(
      {"retry",
       absl::StrCat("lease ", HumanDuration(FromProto(r.lease())), ", backoff ",
                    HumanDuration(FromProto(r.initial_backoff())), " x",
                    r.backoff_multiplier(), " up to ",
                    HumanDuration(FromProto(r.max_backoff())))});
  if (!job.labels().empty()) {
    // Sorted: a proto map has no order.
    std::map<std::string, std::string> labels(job.labels().begin(),
                                              job.labels().end());
    rows.push_back(
        {"labels", absl::StrJoin(labels, ", ", absl::PairFormatter("="))});
  }
  rows.push_back({"created", RelativeTime(FromProto(job.created_at()), now)});
  rows.push_back({"updated", RelativeTime(FromProto(job.updated_at()), now)});
  if (!job.last_error().empty()) {
    rows.push_back({"last error", job.last_error()});
  }
  rows.push_back({"payload", PayloadPreview(job.payload(), 200)});
  return Table(rows);
}

}  // namespace delayd::delayctl
